"""kvrt's operations as the benchmarks call them: on kvrt buffers the caller
fills once, returning libkvrt's status, so that a timed call is the
operation alone.  The structs and function signatures are the kvrt
package's binding (python/kvrt/_lib.py, checked against C by
tests/python/test_structs.py); nothing is declared again here.

    K = kvrt_raw.load(build)       # the build's package and libkvrt
    rt = K.Runtime(); be = rt.bind("cpu", "LBNHC")
    cache = K.Cache(be, "LBNHC", layers, blocks, block_size, kv_heads, head_size)
"""
import ctypes as C
import os
import sys


def load(build):
    """This module with the kvrt package of `build` (<build>/python) bound to
    that build's libkvrt; exits with a message when the build lacks it."""
    pkg = os.path.join(build, "python")
    if not os.path.exists(os.path.join(pkg, "kvrt", "_lib.py")):
        sys.exit("bench: error: %s/kvrt not found: the build has no Python package (meson feature "
                 "python; /usr/bin/python3 needed)" % pkg)
    os.environ["KVRT_LIBRARY"] = os.path.join(build, "core", "libkvrt.so")
    sys.path.insert(0, pkg)
    global K, lib
    from kvrt import _lib as K
    lib = K.lib
    return sys.modules[__name__]


K = lib = None


class KvrtError(RuntimeError):
    pass


def check(rc, what):
    if rc != 0:
        msg = lib.kvrt_error_message()
        raise KvrtError("%s failed (status %d): %s" % (what, rc, msg.decode() if msg else "?"))


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


def version():
    return lib.kvrt_version().decode()


class Runtime:
    """One runtime; bind(backend, layout) gives a backend handle."""

    def __init__(self):
        self.h = C.c_void_p()
        check(lib.kvrt_runtime_open(None, C.byref(self.h)), "kvrt_runtime_open")

    def bind(self, backend, layout):
        b = C.c_void_p()
        check(lib.kvrt_runtime_bind(self.h, backend.encode(), layout.encode(), C.byref(b)),
              "kvrt_runtime_bind(%s, %s)" % (backend, layout))
        return b

    def close(self):
        if self.h:
            lib.kvrt_runtime_close(self.h)
            self.h = C.c_void_p()


class Buffer:
    def __init__(self, backend, nbytes):
        self.nbytes = nbytes
        self.h = C.c_void_p()
        check(lib.kvrt_buffer_create(backend, nbytes, C.byref(self.h)), "kvrt_buffer_create")

    def upload(self, t, offset=0):
        check(lib.kvrt_buffer_upload(self.h, offset, _ptr(t), _nbytes(t)), "kvrt_buffer_upload")

    def download(self, t, offset=0):
        check(lib.kvrt_buffer_download(self.h, offset, _ptr(t), _nbytes(t)), "kvrt_buffer_download")

    def destroy(self):
        if self.h:
            lib.kvrt_buffer_destroy(self.h)
            self.h = C.c_void_p()


class Cache:
    """A cache of `layers` identical attention layers (bf16 unless dtype is
    given) laid out by `layout`."""

    def __init__(self, backend, layout, layers, blocks, block_size, kv_heads, head_size, dtype="bf16"):
        spec = K.Spec()
        lib.kvrt_spec_default(C.byref(spec))
        d, lv = C.c_int(), C.c_int()
        check(lib.kvrt_dtype_parse(dtype.encode(), C.byref(d)), "kvrt_dtype_parse")
        check(lib.kvrt_layout_parse(layout.encode(), C.byref(lv)), "kvrt_layout_parse")
        spec.dtype, spec.block_size, spec.num_kv_heads, spec.head_size = d.value, block_size, kv_heads, head_size
        self._names = [("layer.%d" % i).encode() for i in range(layers)]
        entries = (K.LayerEntry * layers)()
        for i in range(layers):
            entries[i].name = self._names[i]
            entries[i].spec = spec
        group = K.Group(entries, layers)
        self.p = C.c_void_p()
        check(lib.kvrt_placement_create(lv.value, C.byref(group), 1, blocks, 0, C.byref(self.p)),
              "kvrt_placement_create")
        self.size = lib.kvrt_placement_size(self.p)
        self.bytes_per_block = lib.kvrt_placement_bytes_per_block(self.p)
        self.h = C.c_void_p()
        check(lib.kvrt_cache_create(backend, self.p, C.byref(self.h)), "kvrt_cache_create")
        self.buf = lib.kvrt_cache_buffer(self.h)

    def upload(self, t):
        check(lib.kvrt_buffer_upload(self.buf, 0, _ptr(t), _nbytes(t)), "cache upload")

    def download(self, t):
        check(lib.kvrt_buffer_download(self.buf, 0, _ptr(t), _nbytes(t)), "cache download")

    def staging_bytes(self, n):
        out = C.c_uint64()
        check(lib.kvrt_cache_staging_bytes(self.h, n, C.byref(out)), "kvrt_cache_staging_bytes")
        return out.value

    # Operations return libkvrt's status.  Index arrays are host int64
    # (slots, ids, pairs) or int32 (block tables, lengths) numpy arrays or
    # torch tensors.
    def write(self, layer, slots, k, v):
        return lib.kvrt_cache_write(self.h, layer, len(slots), _ptr(slots), k.h, 0, v.h, 0)

    def read(self, layer, slots, k, v):
        return lib.kvrt_cache_read(self.h, layer, len(slots), _ptr(slots), k.h, 0, v.h, 0)

    def copy_blocks(self, pairs):
        return lib.kvrt_cache_copy_blocks(self.h, len(pairs) // 2, _ptr(pairs))

    def gather(self, ids, staging):
        return lib.kvrt_cache_gather(self.h, len(ids), _ptr(ids), staging.h, 0)

    def scatter(self, ids, staging):
        return lib.kvrt_cache_scatter(self.h, len(ids), _ptr(ids), staging.h, 0)

    def decode_params(self, num_seqs, q_heads, q, out, tables, max_blocks, lens, scale):
        p = K.DecodeParams()
        lib.kvrt_decode_params_default(C.byref(p))
        p.num_seqs, p.num_q_heads = num_seqs, q_heads
        p.q, p.out = q.h, out.h
        p.block_tables, p.max_blocks_per_seq = _ptr(tables), max_blocks
        p.seq_lens, p.scale = _ptr(lens), scale
        self._keep = (tables, lens)
        return p

    def decode(self, layer, params):
        return lib.kvrt_cache_decode(self.h, layer, C.byref(params))

    def destroy(self):
        if self.h:
            lib.kvrt_cache_destroy(self.h)
            self.h = C.c_void_p()
        if self.p:
            lib.kvrt_placement_destroy(self.p)
            self.p = C.c_void_p()
