"""A thin ctypes binding of the public libkvrt API (include/kvrt/runtime.h,
placement.h, spec.h) -- just what bench/compare.py needs to run kvrt's
operations on the same host tensors that torch uses.

Structs mirror the C declarations field by field (C alignment rules apply in
ctypes too).  Every call is checked: a non-zero status raises KvrtError with
kvrt_error_message().
"""
import ctypes as C
import os

LAYOUTS = ["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]  # enum kvrt_layout order
DTYPE_BF16 = 2                                                   # enum kvrt_dtype
UNSET = (1 << 64) - 1                                            # KVRT_UNSET


class KvrtError(RuntimeError):
    pass


class Spec(C.Structure):  # struct kvrt_spec
    _fields_ = [
        ("kind", C.c_int),
        ("dtype", C.c_int),
        ("block_size", C.c_uint64),
        ("num_kv_heads", C.c_uint64),
        ("head_size", C.c_uint64),
        ("head_size_v", C.c_uint64),
        ("num_head_slots", C.c_uint64),
        ("state_content_bytes", C.c_uint64),
        ("tokens_per_state_num", C.c_uint64),
        ("tokens_per_state_den", C.c_uint64),
        ("page_size_padded", C.c_uint64),
        ("reserved", C.c_uint8 * 32),
    ]


class LayerEntry(C.Structure):  # struct kvrt_layer_entry
    _fields_ = [("name", C.c_char_p), ("spec", Spec)]


class Group(C.Structure):  # struct kvrt_group
    _fields_ = [("layers", C.POINTER(LayerEntry)), ("num_layers", C.c_size_t)]


class DecodeParams(C.Structure):  # struct kvrt_decode_params
    _fields_ = [
        ("num_seqs", C.c_uint32),
        ("num_q_heads", C.c_uint32),
        ("q", C.c_void_p),
        ("q_offset", C.c_uint64),
        ("out", C.c_void_p),
        ("out_offset", C.c_uint64),
        ("block_tables", C.c_void_p),
        ("max_blocks_per_seq", C.c_uint32),
        ("seq_lens", C.c_void_p),
        ("scale", C.c_float),
        ("reserved", C.c_uint8 * 32),
    ]


def _ptr(t):
    """Host address of a contiguous torch tensor or numpy array."""
    if hasattr(t, "data_ptr"):
        assert t.is_contiguous()
        return C.c_void_p(t.data_ptr())
    return C.c_void_p(t.ctypes.data)


def _nbytes(t):
    if hasattr(t, "element_size"):
        return t.numel() * t.element_size()
    return t.nbytes


class Lib:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        L = self.lib
        vp, u64, i32 = C.c_void_p, C.c_uint64, C.c_int
        sigs = {
            "kvrt_error_message": ([], C.c_char_p),
            "kvrt_version": ([], C.c_char_p),
            "kvrt_runtime_open": ([vp, C.POINTER(vp)], i32),
            "kvrt_runtime_close": ([vp], None),
            "kvrt_runtime_bind": ([vp, C.c_char_p, C.c_char_p, C.POINTER(vp)], i32),
            "kvrt_backend_layout": ([vp], i32),
            "kvrt_spec_default": ([C.POINTER(Spec)], None),
            "kvrt_placement_create": ([i32, C.POINTER(Group), C.c_size_t, u64, u64, C.POINTER(vp)], i32),
            "kvrt_placement_destroy": ([vp], None),
            "kvrt_placement_size": ([vp], u64),
            "kvrt_placement_bytes_per_block": ([vp], u64),
            "kvrt_cache_create": ([vp, vp, C.POINTER(vp)], i32),
            "kvrt_cache_destroy": ([vp], None),
            "kvrt_cache_buffer": ([vp], vp),
            "kvrt_cache_staging_bytes": ([vp, u64, C.POINTER(u64)], i32),
            "kvrt_buffer_create": ([vp, u64, C.POINTER(vp)], i32),
            "kvrt_buffer_destroy": ([vp], None),
            "kvrt_buffer_upload": ([vp, u64, vp, u64], i32),
            "kvrt_buffer_download": ([vp, u64, vp, u64], i32),
            "kvrt_cache_write": ([vp, C.c_uint32, u64, vp, vp, u64, vp, u64], i32),
            "kvrt_cache_read": ([vp, C.c_uint32, u64, vp, vp, u64, vp, u64], i32),
            "kvrt_cache_copy_blocks": ([vp, u64, vp], i32),
            "kvrt_cache_gather": ([vp, u64, vp, vp, u64], i32),
            "kvrt_cache_scatter": ([vp, u64, vp, vp, u64], i32),
            "kvrt_decode_params_default": ([C.POINTER(DecodeParams)], None),
            "kvrt_cache_decode": ([vp, C.c_uint32, C.POINTER(DecodeParams)], i32),
        }
        for name, (args, res) in sigs.items():
            f = getattr(L, name)
            f.argtypes = args
            f.restype = res

    def check(self, rc, what):
        if rc != 0:
            msg = self.lib.kvrt_error_message()
            raise KvrtError("%s failed (status %d): %s" % (what, rc, msg.decode() if msg else "?"))


class Runtime:
    """One runtime; bind(layout) gives a Backend for the cpu plugin."""

    def __init__(self, lib):
        self.k = lib
        self.h = C.c_void_p()
        lib.check(lib.lib.kvrt_runtime_open(None, C.byref(self.h)), "kvrt_runtime_open")

    def bind(self, backend, layout):
        b = C.c_void_p()
        self.k.check(self.k.lib.kvrt_runtime_bind(self.h, backend.encode(), layout.encode(), C.byref(b)),
                     "kvrt_runtime_bind(%s, %s)" % (backend, layout))
        return b

    def close(self):
        if self.h:
            self.k.lib.kvrt_runtime_close(self.h)
            self.h = C.c_void_p()


class Buffer:
    def __init__(self, lib, backend, nbytes):
        self.k, self.nbytes = lib, nbytes
        self.h = C.c_void_p()
        lib.check(lib.lib.kvrt_buffer_create(backend, nbytes, C.byref(self.h)), "kvrt_buffer_create")

    def upload(self, t, offset=0):
        self.k.check(self.k.lib.kvrt_buffer_upload(self.h, offset, _ptr(t), _nbytes(t)), "kvrt_buffer_upload")

    def download(self, t, offset=0):
        self.k.check(self.k.lib.kvrt_buffer_download(self.h, offset, _ptr(t), _nbytes(t)), "kvrt_buffer_download")

    def destroy(self):
        if self.h:
            self.k.lib.kvrt_buffer_destroy(self.h)
            self.h = C.c_void_p()


class Cache:
    """A cache of `layers` identical attention layers laid out by `layout`."""

    def __init__(self, lib, backend, layout, layers, blocks, block_size, kv_heads, head_size, dtype=DTYPE_BF16):
        self.k = lib
        L = lib.lib
        spec = Spec()
        L.kvrt_spec_default(C.byref(spec))
        spec.dtype = dtype
        spec.block_size = block_size
        spec.num_kv_heads = kv_heads
        spec.head_size = head_size
        self._names = [("layer.%d" % i).encode() for i in range(layers)]
        entries = (LayerEntry * layers)()
        for i in range(layers):
            entries[i].name = self._names[i]
            entries[i].spec = spec
        group = Group(entries, layers)
        self.p = C.c_void_p()
        lib.check(L.kvrt_placement_create(LAYOUTS.index(layout), C.byref(group), 1, blocks, 0, C.byref(self.p)),
                  "kvrt_placement_create")
        self.size = L.kvrt_placement_size(self.p)
        self.bytes_per_block = L.kvrt_placement_bytes_per_block(self.p)
        self.h = C.c_void_p()
        lib.check(L.kvrt_cache_create(backend, self.p, C.byref(self.h)), "kvrt_cache_create")
        self.buf = L.kvrt_cache_buffer(self.h)

    def upload(self, t):
        self.k.check(self.k.lib.kvrt_buffer_upload(self.buf, 0, _ptr(t), _nbytes(t)), "cache upload")

    def download(self, t):
        self.k.check(self.k.lib.kvrt_buffer_download(self.buf, 0, _ptr(t), _nbytes(t)), "cache download")

    def staging_bytes(self, n):
        out = C.c_uint64()
        self.k.check(self.k.lib.kvrt_cache_staging_bytes(self.h, n, C.byref(out)), "kvrt_cache_staging_bytes")
        return out.value

    # Operations.  Index arrays are host int64 (slots, ids, pairs) or int32
    # (block tables, lengths) numpy arrays or torch tensors.
    def write(self, layer, slots, k, v):
        return self.k.lib.kvrt_cache_write(self.h, layer, len(slots), _ptr(slots), k.h, 0, v.h, 0)

    def read(self, layer, slots, k, v):
        return self.k.lib.kvrt_cache_read(self.h, layer, len(slots), _ptr(slots), k.h, 0, v.h, 0)

    def copy_blocks(self, pairs):
        return self.k.lib.kvrt_cache_copy_blocks(self.h, len(pairs) // 2, _ptr(pairs))

    def gather(self, ids, staging):
        return self.k.lib.kvrt_cache_gather(self.h, len(ids), _ptr(ids), staging.h, 0)

    def scatter(self, ids, staging):
        return self.k.lib.kvrt_cache_scatter(self.h, len(ids), _ptr(ids), staging.h, 0)

    def decode_params(self, num_seqs, q_heads, q, out, tables, max_blocks, lens, scale):
        p = DecodeParams()
        self.k.lib.kvrt_decode_params_default(C.byref(p))
        p.num_seqs, p.num_q_heads = num_seqs, q_heads
        p.q, p.out = q.h, out.h
        p.block_tables, p.max_blocks_per_seq = _ptr(tables), max_blocks
        p.seq_lens, p.scale = _ptr(lens), scale
        self._keep = (tables, lens)
        return p

    def decode(self, layer, params):
        return self.k.lib.kvrt_cache_decode(self.h, layer, C.byref(params))

    def destroy(self):
        if self.h:
            self.k.lib.kvrt_cache_destroy(self.h)
            self.h = C.c_void_p()
        if self.p:
            self.k.lib.kvrt_placement_destroy(self.p)
            self.p = C.c_void_p()


def find_lib(root):
    path = os.path.join(root, "build", "core", "libkvrt.so")
    return path if os.path.exists(path) else None
