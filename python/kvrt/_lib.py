"""Loading libkvrt and declaring the C API with ctypes.

The library is found, in order, at ``$KVRT_LIBRARY`` (a path), at the path
recorded in ``kvrt/_paths.py`` when the package was configured by Meson
(the build tree's libkvrt for the copy in ``<build>/python``, the installed
one for the installed package), then by the loader's usual search.
Structs mirror the C declarations field by field; each names its C struct
in `_c_name`, and tests/python/test_structs.py holds every size and field
offset to what C says.  This is the package's one binding: the benchmarks
(bench/kvrt_raw.py) use it too.
"""
import ctypes as C
import ctypes.util
import json
import os

from ._errors import error_for

UNSET = (1 << 64) - 1  # KVRT_UNSET
NUM_AXES = 5
NUM_LAYOUTS = 6
TRACE_NO_LAYOUT = -1
NUM_SETTINGS = 6
SETTING_LAYOUT = 0  # enum kvrt_setting
SOURCE_ARGUMENT = 2  # enum kvrt_setting_source
API_MAJOR = 1  # libkvrt's soname is libkvrt.so.<API major>
# The C macros mirrored above, by their C names (held to C by
# tests/python/test_structs.py).
C_CONSTANTS = {"KVRT_UNSET": UNSET, "KVRT_NUM_AXES": NUM_AXES, "KVRT_NUM_LAYOUTS": NUM_LAYOUTS,
               "KVRT_TRACE_NO_LAYOUT": TRACE_NO_LAYOUT, "KVRT_API_VERSION_MAJOR": API_MAJOR,
               "KVRT_NUM_SETTINGS": NUM_SETTINGS, "KVRT_SETTING_LAYOUT": SETTING_LAYOUT,
               "KVRT_SOURCE_ARGUMENT": SOURCE_ARGUMENT}
SONAME = "libkvrt.so.%d" % API_MAJOR

vp, u64, u32, i32, sz = C.c_void_p, C.c_uint64, C.c_uint32, C.c_int, C.c_size_t


class Spec(C.Structure):
    _c_name = "kvrt_spec"
    _fields_ = [("kind", i32), ("dtype", i32), ("block_size", u64), ("num_kv_heads", u64),
                ("head_size", u64), ("head_size_v", u64), ("num_head_slots", u64),
                ("state_content_bytes", u64), ("tokens_per_state_num", u64),
                ("tokens_per_state_den", u64), ("page_size_padded", u64), ("reserved", C.c_uint8 * 32)]


class SpecInfo(C.Structure):
    _c_name = "kvrt_spec_info"
    _fields_ = [(n, u64) for n in (
        "elem_size", "head_slots", "states_per_block", "kernel_block_size", "kernel_blocks_per_block",
        "states_per_kernel_block", "content_bytes", "head_size", "head_size_v", "unpadded_page_size",
        "page_size")]


class GeometryParams(C.Structure):
    _c_name = "kvrt_geometry_params"
    _fields_ = [("layout", i32), ("spec", C.POINTER(Spec)), ("num_layers", u64), ("num_blocks", u64),
                ("kernel_block_size", u64), ("fixed_strides", u64 * NUM_AXES), ("reserved", C.c_uint8 * 32)]


class Geometry(C.Structure):
    _c_name = "kvrt_geometry"
    _fields_ = [("layout", i32), ("info", SpecInfo), ("num_layers", u64), ("num_blocks", u64),
                ("shape_bytes", u64 * NUM_AXES), ("strides_bytes", u64 * NUM_AXES),
                ("total_bytes", u64), ("layer_stride", u64), ("block_stride", u64)]


class View(C.Structure):
    _c_name = "kvrt_view"
    _fields_ = [("offset_bytes", u64), ("elem_size", u64), ("shape", u64 * 4), ("strides", u64 * 4),
                ("shape_bytes", u64 * 4), ("strides_bytes", u64 * 4)]


class LayerEntry(C.Structure):
    _c_name = "kvrt_layer_entry"
    _fields_ = [("name", C.c_char_p), ("spec", Spec)]


class Group(C.Structure):
    _c_name = "kvrt_group"
    _fields_ = [("layers", C.POINTER(LayerEntry)), ("num_layers", sz)]


LOG_FN = C.CFUNCTYPE(None, vp, i32, C.c_char_p)


class RuntimeOptions(C.Structure):
    _c_name = "kvrt_runtime_options"
    _fields_ = [("plugin_path", C.c_char_p), ("search_default_paths", C.c_bool), ("log", LOG_FN),
                ("log_user", vp), ("reserved", C.c_uint8 * 64)]


class PluginInfo(C.Structure):
    _c_name = "kvrt_plugin_info"
    _fields_ = [("name", C.c_char_p), ("path", C.c_char_p), ("version", C.c_char_p),
                ("description", C.c_char_p), ("abi_major", C.c_uint), ("abi_minor", C.c_uint),
                ("any_layout", C.c_bool), ("num_layouts", sz), ("layouts", i32 * NUM_LAYOUTS),
                ("dtypes", u32), ("ops", u32), ("available", C.c_bool), ("reason", C.c_char_p),
                ("device_type", i32), ("memory", i32), ("device_name", C.c_char_p), ("decode_dtypes", u32),
                ("import_alignment", u32), ("reserved", C.c_uint8 * 28)]


class TraceStep(C.Structure):
    _c_name = "kvrt_trace_step"
    _fields_ = [("kind", i32), ("layout", C.c_int32), ("backend", C.c_char_p), ("text", C.c_char_p),
                ("reserved", C.c_uint8 * 32)]


class ModelOptions(C.Structure):
    _c_name = "kvrt_model_options"
    _fields_ = [("kv_cache_dtype", i32), ("attention_backend", i32), ("block_size", u64), ("dtype_given", u32),
                ("dtype", i32), ("dtype_option", C.c_char_p), ("reserved", C.c_uint8 * 32)]


class ModelGroup(C.Structure):
    _c_name = "kvrt_model_group"
    _fields_ = [("name", C.c_char_p), ("what", C.c_char_p), ("window", u64), ("usage", i32), ("num_layers", sz),
                ("layers", C.POINTER(LayerEntry)), ("reserved", C.c_uint8 * 32)]


class ModelSetting(C.Structure):
    _c_name = "kvrt_model_setting"
    _fields_ = [("name", C.c_char_p), ("value", C.c_char_p), ("source", C.c_char_p), ("reserved", C.c_uint8 * 16)]


class ModelInfo(C.Structure):
    _c_name = "kvrt_model_info"
    _fields_ = [("name", C.c_char_p), ("source", C.c_char_p), ("format", C.c_char_p), ("architecture", C.c_char_p),
                ("num_layers", u64), ("num_q_heads", u64), ("max_model_len", u64),
                ("max_model_len_source", C.c_char_p), ("num_groups", sz), ("groups", C.POINTER(ModelGroup)),
                ("placement_groups", C.POINTER(Group)), ("num_settings", sz),
                ("settings", C.POINTER(ModelSetting)), ("num_notes", sz), ("notes", C.POINTER(C.c_char_p)),
                ("reserved", C.c_uint8 * 64)]


class ModelPlanRequest(C.Structure):
    _c_name = "kvrt_model_plan_request"
    _fields_ = [("layout", i32), ("layout_source", C.c_char_p), ("num_blocks", u64), ("kernel_block_size", u64),
                ("budget_bytes", u64), ("max_model_len", u64), ("max_model_len_source", C.c_char_p),
                ("batched_tokens", u64), ("batched_tokens_source", C.c_char_p), ("reserved", C.c_uint8 * 32)]


class DecodeParams(C.Structure):
    _c_name = "kvrt_decode_params"
    _fields_ = [("num_seqs", u32), ("num_q_heads", u32), ("q", vp), ("q_offset", u64), ("out", vp),
                ("out_offset", u64), ("block_tables", vp), ("max_blocks_per_seq", u32),
                ("seq_lens", vp), ("scale", C.c_float), ("reserved", C.c_uint8 * 32)]


class TpHeads(C.Structure):
    _c_name = "kvrt_tp_heads"
    _fields_ = [("head_start", u64), ("num_heads", u64), ("replicas", u64), ("replica", u64),
                ("reserved", C.c_uint8 * 32)]


class TpEntry(C.Structure):
    _c_name = "kvrt_tp_entry"
    _fields_ = [("remote_rank", u64), ("local_head_start", u64), ("remote_head_start", u64), ("num_heads", u64),
                ("reserved", C.c_uint8 * 32)]


# DLPack 0.6 (dlpack/dlpack.h)
class DLDevice(C.Structure):
    _c_name = "DLDevice"
    _fields_ = [("device_type", i32), ("device_id", i32)]


class DLDataType(C.Structure):
    _c_name = "DLDataType"
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _c_name = "DLTensor"
    _fields_ = [("data", vp), ("device", DLDevice), ("ndim", i32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", u64)]


class DLManagedTensor(C.Structure):
    _c_name = "DLManagedTensor"
    pass


DLDELETER = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", vp), ("deleter", DLDELETER)]

P = C.POINTER
_SIGNATURES = {
    "kvrt_error_message": ([], C.c_char_p),
    "kvrt_status_name": ([i32], C.c_char_p),
    "kvrt_version": ([], C.c_char_p),
    "kvrt_free": ([vp], None),
    "kvrt_layout_name": ([i32], C.c_char_p),
    "kvrt_layout_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_layout_stride_order": ([i32, i32 * NUM_AXES], i32),
    "kvrt_layout_layer_view_order": ([i32, i32 * 4], i32),
    "kvrt_layout_layer_compact": ([i32], C.c_bool),
    "kvrt_layout_block_outermost": ([i32], C.c_bool),
    "kvrt_layout_block_compact": ([i32], C.c_bool),
    "kvrt_layout_block_contiguous": ([i32], C.c_bool),
    "kvrt_layout_valid_names": ([], C.c_char_p),
    "kvrt_layouts_json": ([P(vp)], i32),
    "kvrt_layout_from_env": ([P(C.c_bool), P(i32)], i32),
    "kvrt_layout_default": ([], i32),
    "kvrt_layout_from_env_or_default": ([P(i32), P(C.c_bool)], i32),
    "kvrt_layout_choose": ([C.c_char_p, P(i32), P(i32)], i32),
    "kvrt_setting_variable": ([i32], C.c_char_p),
    "kvrt_setting_summary": ([i32], C.c_char_p),
    "kvrt_setting_source_name": ([i32], C.c_char_p),
    "kvrt_setting_get": ([i32, C.c_char_p, P(C.c_char_p), P(i32)], i32),
    "kvrt_setting_origin": ([i32, i32, C.c_char_p], C.c_char_p),
    "kvrt_dtype_size": ([i32], sz),
    "kvrt_dtype_name": ([i32], C.c_char_p),
    "kvrt_dtype_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_spec_default": ([P(Spec)], None),
    "kvrt_spec_apply_defaults": ([P(Spec)], i32),
    "kvrt_spec_kind_name": ([i32], C.c_char_p),
    "kvrt_spec_kind_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_spec_kind_valid_names": ([], C.c_char_p),
    "kvrt_dtype_valid_names": ([], C.c_char_p),
    "kvrt_device_type_name": ([i32], C.c_char_p),
    "kvrt_memory_kind_name": ([i32], C.c_char_p),
    "kvrt_spec_derive": ([P(Spec), u64, P(SpecInfo)], i32),
    "kvrt_geometry_params_default": ([P(GeometryParams)], None),
    "kvrt_geometry_compute": ([P(GeometryParams), P(Geometry)], i32),
    "kvrt_geometry_layer_view": ([P(Geometry), u64, u64, P(View)], i32),
    "kvrt_geometry_json": ([P(GeometryParams), C.c_char_p, u64, P(vp)], i32),
    "kvrt_placement_create": ([i32, P(Group), sz, u64, u64, P(vp)], i32),
    "kvrt_placement_destroy": ([vp], None),
    "kvrt_placement_blocks_for_budget": ([i32, P(Group), sz, u64, P(u64)], i32),
    "kvrt_placement_size": ([vp], u64),
    "kvrt_placement_bytes_per_block": ([vp], u64),
    "kvrt_placement_mixed_shapes": ([P(Group), sz, P(C.c_bool)], i32),
    "kvrt_resolver_create": ([P(vp)], i32),
    "kvrt_resolver_destroy": ([vp], None),
    "kvrt_resolver_declare": ([vp, C.c_char_p, P(i32), sz], i32),
    "kvrt_resolver_declare_any": ([vp, C.c_char_p], i32),
    "kvrt_resolver_set_mixed_shapes": ([vp, C.c_bool], i32),
    "kvrt_resolver_set_groups": ([vp, P(Group), sz], i32),
    "kvrt_resolver_set_preference": ([vp, C.c_char_p, C.c_char_p], i32),
    "kvrt_resolver_resolve": ([vp, P(i32)], i32),
    "kvrt_resolver_candidates": ([vp, i32 * NUM_LAYOUTS], sz),
    "kvrt_resolver_warned": ([vp], C.c_bool),
    "kvrt_resolver_trace": ([vp], C.c_char_p),
    "kvrt_resolver_json": ([vp, P(vp)], i32),
    "kvrt_resolver_num_trace_steps": ([vp], sz),
    "kvrt_resolver_trace_step": ([vp, sz, P(TraceStep)], i32),
    "kvrt_trace_kind_name": ([i32], C.c_char_p),
    "kvrt_runtime_options_default": ([P(RuntimeOptions)], None),
    "kvrt_runtime_open": ([P(RuntimeOptions), P(vp)], i32),
    "kvrt_runtime_close": ([vp], None),
    "kvrt_runtime_num_plugins": ([vp], sz),
    "kvrt_runtime_plugin_info": ([vp, sz, P(PluginInfo)], i32),
    "kvrt_runtime_default_backend": ([vp, P(C.c_char_p)], i32),
    "kvrt_runtime_resolve": ([vp, P(C.c_char_p), sz, C.c_bool, C.c_char_p, P(i32)], i32),
    "kvrt_runtime_resolve_groups": ([vp, P(C.c_char_p), sz, P(Group), sz, C.c_char_p, P(i32)], i32),
    "kvrt_runtime_bind": ([vp, C.c_char_p, C.c_char_p, P(vp)], i32),
    "kvrt_runtime_bind_layout": ([vp, C.c_char_p, i32, P(vp)], i32),
    "kvrt_runtime_choose_backend": ([vp, C.c_char_p, P(C.c_char_p), P(i32)], i32),
    "kvrt_runtime_num_trace_steps": ([vp], sz),
    "kvrt_runtime_trace_step": ([vp, sz, P(TraceStep)], i32),
    "kvrt_runtime_trace_json": ([vp, P(vp)], i32),
    "kvrt_backend_name": ([vp], C.c_char_p),
    "kvrt_backend_layout": ([vp], i32),
    "kvrt_buffer_create": ([vp, u64, P(vp)], i32),
    "kvrt_buffer_destroy": ([vp], None),
    "kvrt_buffer_upload": ([vp, u64, vp, u64], i32),
    "kvrt_buffer_download": ([vp, u64, vp, u64], i32),
    "kvrt_cache_create": ([vp, vp, P(vp)], i32),
    "kvrt_cache_destroy": ([vp], None),
    "kvrt_cache_num_layers": ([vp], u64),
    "kvrt_cache_buffer": ([vp], vp),
    "kvrt_cache_layer_index": ([vp, C.c_char_p, P(u32)], i32),
    "kvrt_cache_staging_bytes": ([vp, u64, P(u64)], i32),
    "kvrt_cache_write": ([vp, u32, u64, vp, vp, u64, vp, u64], i32),
    "kvrt_cache_read": ([vp, u32, u64, vp, vp, u64, vp, u64], i32),
    "kvrt_cache_copy_blocks": ([vp, u64, vp], i32),
    "kvrt_cache_gather": ([vp, u64, vp, vp, u64], i32),
    "kvrt_cache_scatter": ([vp, u64, vp, vp, u64], i32),
    "kvrt_decode_params_default": ([P(DecodeParams)], None),
    "kvrt_cache_decode": ([vp, u32, P(DecodeParams)], i32),
    "kvrt_cache_export_layer": ([vp, u32, i32, P(P(DLManagedTensor))], i32),
    "kvrt_cache_export_layers": ([vp, i32, P(P(DLManagedTensor))], i32),
    "kvrt_cache_from_dlpack": ([vp, vp, P(DLManagedTensor), P(vp)], i32),
    "kvrt_cache_is_wrapped": ([vp], C.c_bool),
    "kvrt_dlpack_live_tensors": ([], u64),
    "kvrt_dlpack_capsule_destructor": ([vp], None),
    "kvrt_free": ([vp], None),
    "kvrt_model_options_default": ([P(ModelOptions)], None),
    "kvrt_model_open": ([C.c_char_p, P(ModelOptions), P(vp)], i32),
    "kvrt_model_destroy": ([vp], None),
    "kvrt_model_get_info": ([vp], P(ModelInfo)),
    "kvrt_model_mixed_shapes": ([vp], i32),
    "kvrt_kv_cache_dtype_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_attention_backend_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_model_plan_request_default": ([P(ModelPlanRequest)], None),
    "kvrt_model_plan_json": ([vp, P(ModelPlanRequest), P(vp)], i32),
    "kvrt_tp_heads": ([u64, u64, u64, P(TpHeads)], i32),
    "kvrt_tp_direction_name": ([i32], C.c_char_p),
    "kvrt_tp_direction_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_tp_direction_valid_names": ([], C.c_char_p),
    "kvrt_tp_map": ([u64, u64, u64, u64, u64, i32, P(TpEntry), sz, P(sz)], i32),
    "kvrt_pp_partition_env": ([P(C.c_char_p), P(C.c_char_p)], i32),
    "kvrt_pp_layers": ([u64, u64, u64, P(u64), P(u64)], i32),
    "kvrt_pp_layers_partition": ([u64, u64, u64, C.c_char_p, P(u64), P(u64)], i32),
}


def candidates(env, attr, soname, find=None):
    """Where to look for a library, in order: the path in environment
    variable `env` alone when set; else the path _paths.py names as `attr`
    (this copy of the package's build or install; "" where it was not
    built), ctypes.util.find_library(find) when `find` is given, and the
    soname (the loader's search).  libkvrt, libkvrt-xfer and libkvrt-store
    are all found by this rule."""
    path = os.environ.get(env)
    if path:
        return [path]
    found = []
    try:
        from . import _paths
        if getattr(_paths, attr, ""):
            found.append(getattr(_paths, attr))
    except ImportError:
        pass
    if find:
        lib = ctypes.util.find_library(find)
        if lib:
            found.append(lib)
    found.append(soname)
    return found


def load(paths, signatures, hint):
    """The first of `paths` (candidates()) that loads, with each function of
    `signatures` typed, and its path; ImportError with every reason and
    `hint` when none does.  kvrt.xfer loads libkvrt-xfer with it too."""
    errors = []
    for path in paths:
        try:
            found = C.CDLL(path)
        except OSError as e:
            errors.append("%s (%s)" % (path, e))
            continue
        for name, (args, res) in signatures.items():
            f = getattr(found, name)
            f.argtypes = args
            f.restype = res
        return found, path
    raise ImportError(hint % "; ".join(errors))


lib, path = load(candidates("KVRT_LIBRARY", "LIBRARY", SONAME, find="kvrt"), _SIGNATURES,
                 "kvrt: cannot load libkvrt; tried %s. Set KVRT_LIBRARY to the path of "
                 "libkvrt.so (e.g. build/core/libkvrt.so)")


def check(rc):
    """Raise the kvrt.Error subclass for a failed status, with libkvrt's message."""
    if rc != 0:
        msg = lib.kvrt_error_message()
        raise error_for(rc, msg.decode("utf-8", "replace") if msg else lib.kvrt_status_name(rc).decode())
    return rc


def text(p):
    return p.decode("utf-8", "replace") if p is not None else None


def json_answer(fn, *args):
    """The JSON one of libkvrt's *_json functions writes (fn(*args, &out)),
    decoded; raises the kvrt.Error of a failure."""
    out = C.c_void_p()
    check(fn(*args, C.byref(out)))
    try:
        return json.loads(C.string_at(out.value).decode("utf-8"))
    finally:
        lib.kvrt_free(out)
