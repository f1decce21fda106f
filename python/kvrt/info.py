"""Layouts, resolution and plans as plain dicts: the same objects the
``kvrt`` tool prints with ``--json`` (``kvrt layouts``, ``kvrt resolve``,
``kvrt plan``), written by libkvrt itself (kvrt_layouts_json,
kvrt_resolver_json, kvrt_geometry_json, kvrt_model_plan_json)."""
import ctypes as C

from . import _lib
from ._lib import lib, check, json_answer, text



def layout_value(name):
    """enum kvrt_layout of a layout name or alias (exact, case-sensitive)."""
    if isinstance(name, int):
        return name
    out = C.c_int()
    check(lib.kvrt_layout_parse(name.encode() if name is not None else None, C.byref(out)))
    return out.value


def layout_name(value):
    return text(lib.kvrt_layout_name(value))


def dtype_value(name):
    """enum kvrt_dtype of "fp32", "fp16", "bf16", "fp8_e4m3", ... (also "float16" ...)."""
    if isinstance(name, int):
        return name
    out = C.c_int()
    check(lib.kvrt_dtype_parse(name.encode(), C.byref(out)))
    return out.value


def dtype_name(value):
    return text(lib.kvrt_dtype_name(value))


def kind_value(name):
    """enum kvrt_spec_kind of "attention", "mla" or "state" (libkvrt's names)."""
    if isinstance(name, int):
        return name
    out = C.c_int()
    check(lib.kvrt_spec_kind_parse(name.encode() if isinstance(name, str) else None, C.byref(out)))
    return out.value


def kind_name(value):
    return text(lib.kvrt_spec_kind_name(value))


def layouts():
    """The six layouts, their orders and properties, and the aliases:
    ``kvrt layouts --json``."""
    return json_answer(lib.kvrt_layouts_json)


def resolve(declare=None, prefer=None, mixed_shapes=False):
    """Choose one layout for backend declarations: ``kvrt resolve --json``.

    declare: {backend: [layouts, best first] or "any"}; None or {}: the
    default preference.  prefer: a soft preference.  Reads
    VLLM_KV_CACHE_LAYOUT like the tool.  Returns {"layout", "candidates",
    "warning", "env", "trace", "steps"}; raises RefusedError when nothing fits."""
    r = C.c_void_p()
    check(lib.kvrt_resolver_create(C.byref(r)))
    try:
        for backend, lst in (declare or {}).items():
            if lst == "any":
                check(lib.kvrt_resolver_declare_any(r, backend.encode()))
                continue
            if isinstance(lst, str):
                lst = lst.split(",")
            arr = (C.c_int * max(1, len(lst)))(*[layout_value(x) for x in lst])
            check(lib.kvrt_resolver_declare(r, backend.encode(), arr, len(lst)))
        if prefer is not None:
            check(lib.kvrt_resolver_set_preference(r, prefer.encode(), b"kvrt.resolve(prefer=)"))
        if mixed_shapes:
            check(lib.kvrt_resolver_set_mixed_shapes(r, True))
        chosen = C.c_int()
        check(lib.kvrt_resolver_resolve(r, C.byref(chosen)))
        return json_answer(lib.kvrt_resolver_json, r)
    finally:
        lib.kvrt_resolver_destroy(r)


def make_spec(kind=None, dtype=None, block_size=None, kv_heads=None, head_size=None, head_size_v=None,
              head_slots=None, state_content_bytes=None, tokens_per_state=None, page_size_padded=None):
    """A struct kvrt_spec from keyword arguments.  What is not given is
    libkvrt's default, as the tool has it (kvrt_spec_default, then
    kvrt_spec_apply_defaults): attention, fp16, KVRT_DEFAULT_BLOCK_SIZE
    tokens per block, one KV head for MLA and state."""
    s = _lib.Spec()
    lib.kvrt_spec_default(C.byref(s))
    if kind is not None:
        s.kind = kind_value(kind)
    check(lib.kvrt_spec_apply_defaults(C.byref(s)))
    if dtype is not None:
        s.dtype = dtype_value(dtype)
    if block_size is not None:
        s.block_size = block_size
    if kv_heads is not None:
        s.num_kv_heads = kv_heads
    if head_size is not None:
        s.head_size = head_size
    if head_size_v is not None:
        s.head_size_v = head_size_v
    if head_slots is not None:
        s.num_head_slots = head_slots
    if state_content_bytes is not None:
        s.state_content_bytes = state_content_bytes
    if tokens_per_state is not None:
        num, den = tokens_per_state if isinstance(tokens_per_state, tuple) else (tokens_per_state, 1)
        s.tokens_per_state_num, s.tokens_per_state_den = num, den
    if page_size_padded is not None:
        s.page_size_padded = page_size_padded
    return s


def settings():
    """Each environment variable libkvrt reads, with the value it has now and
    where that came from, as libkvrt answers (kvrt_setting_get): {variable:
    {"value": as spelled or None, "source": "environment" or "default",
    "summary": what it decides}}."""
    out = {}
    for s in range(_lib.NUM_SETTINGS):
        value, source = C.c_char_p(), C.c_int()
        check(lib.kvrt_setting_get(s, None, C.byref(value), C.byref(source)))
        out[text(lib.kvrt_setting_variable(s))] = {
            "value": None if value.value is None else value.value.decode(errors="replace"),
            "source": text(lib.kvrt_setting_source_name(source.value)),
            "summary": text(lib.kvrt_setting_summary(s)),
        }
    return out


def _layout_choice(layout):
    """(enum kvrt_layout, where it came from): `layout` (a name, an alias or
    a value), else VLLM_KV_CACHE_LAYOUT, else kvrt's default, as libkvrt's
    kvrt_layout_choose answers; the source as kvrt_setting_origin words it,
    "layout" naming this keyword."""
    out, source = C.c_int(), C.c_int(_lib.SOURCE_ARGUMENT)
    if isinstance(layout, int):
        out.value = layout  # a value already: whatever takes it checks it
    else:
        check(lib.kvrt_layout_choose(None if layout is None else layout.encode(), C.byref(out), C.byref(source)))
    return out.value, text(lib.kvrt_setting_origin(_lib.SETTING_LAYOUT, source.value, b"layout"))


def _group(spec, layers):
    names = [("layer.%d" % i).encode() for i in range(layers)]
    entries = (_lib.LayerEntry * layers)()
    for i in range(layers):
        entries[i].name = names[i]
        entries[i].spec = spec
    return _lib.Group(entries, layers), (names, entries)


_MODEL_KEYWORDS = ("kv_cache_dtype", "attention_backend", "max_model_len", "max_num_batched_tokens")


def plan(layers=1, blocks=None, memory=None, layout=None, kernel_block_size=0, model=None, **spec):
    """Where every byte of a cache goes, as ``kvrt plan --json``.

    With model (a config.json, a folder holding one, or a kvrt model file):
    the model's groups sized as vLLM sizes them, ``kvrt plan --model FILE
    --json``; keywords kv_cache_dtype, block_size, attention_backend,
    max_model_len and max_num_batched_tokens are the tool's options, and
    neither blocks nor memory means one block.

    Without: `layers` identical layers; give blocks, or memory (a budget in
    bytes); spec keywords as :func:`make_spec` (kind, dtype, block_size,
    kv_heads, head_size, head_size_v, head_slots, state_content_bytes,
    tokens_per_state, page_size_padded).  layout None: VLLM_KV_CACHE_LAYOUT
    if set, else kvrt's default layout (kvrt_layout_default)."""
    if model is not None:
        return _plan_model(model, blocks, memory, layout, kernel_block_size, **spec)
    extra = [k for k in _MODEL_KEYWORDS if k in spec]
    if extra:
        raise _lib.error_for(-1, "plan: %s applies to model= (a model file); with spec keywords give the cache "
                                 "type as dtype" % extra[0])
    if (blocks is None) == (memory is None):
        raise _lib.error_for(-1, "plan: give blocks (the number of blocks) or memory (a budget in bytes), "
                                 "exactly one of them")
    s = make_spec(**spec)
    lv, source = _layout_choice(layout)
    if memory is not None:
        g, keep = _group(s, layers)
        n = C.c_uint64()
        check(lib.kvrt_placement_blocks_for_budget(lv, C.byref(g), 1, memory, C.byref(n)))
        blocks = n.value
    params = _lib.GeometryParams()
    lib.kvrt_geometry_params_default(C.byref(params))
    params.layout, params.spec = lv, C.pointer(s)
    params.num_layers, params.num_blocks, params.kernel_block_size = layers, blocks, kernel_block_size
    return json_answer(lib.kvrt_geometry_json, C.byref(params), source.encode(), memory or 0)


def _plan_model(model, blocks, memory, layout, kernel_block_size, kv_cache_dtype=None, block_size=None,
                attention_backend=None, max_model_len=None, max_num_batched_tokens=None, **spec):
    from ._model import Model
    if spec:
        raise _lib.error_for(-1, "plan: %s cannot be combined with model=, which gives the layers and their "
                                 "specs (only kv_cache_dtype, block_size and attention_backend override it)"
                                 % sorted(spec)[0])
    if blocks is not None and memory is not None:
        raise _lib.error_for(-1, "plan: give blocks or memory, not both")
    lv, source = _layout_choice(layout)
    with Model(model, kv_cache_dtype, block_size, attention_backend) as m:
        return m.plan(lv, source, blocks, memory, kernel_block_size, max_model_len, max_num_batched_tokens)
