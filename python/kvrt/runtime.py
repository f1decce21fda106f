"""Runtime, caches and their DLPack views."""
import ctypes as C
import math
import os
import weakref

from . import _lib, info
from ._closeable import Closeable
from ._dlpack import Borrowed, capsule
from ._errors import InvalidArgumentError, StateError
from ._indices import index_array
from ._lib import lib, check, json_answer, text
from ._model import Model, whole

_PARTS = {"all": 0, "k": 1, "v": 2}


_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int8": "int8", "uint8": "uint8",
                 "fp8_e4m3": "uint8", "fp8_e5m2": "uint8", "int32": "int32", "int64": "int64"}
_NUMPY_DTYPES = {"fp32": "float32", "fp16": "float16", "int8": "int8", "uint8": "uint8",
                 "fp8_e4m3": "uint8", "fp8_e5m2": "uint8", "int32": "int32", "int64": "int64"}


def _empty(shape, dtype):
    """A new host tensor: torch when importable, else numpy."""
    try:
        import torch
        return torch.empty(tuple(shape), dtype=getattr(torch, _TORCH_DTYPES[dtype]))
    except ImportError:
        pass
    try:
        import numpy
    except ImportError:
        raise InvalidArgumentError("no output tensor given and neither torch nor numpy is importable; "
                                   "pass out=") from None
    if dtype not in _NUMPY_DTYPES:
        raise InvalidArgumentError("numpy has no %s type and torch is not importable; pass an output "
                                   "tensor" % dtype)
    return numpy.empty(tuple(shape), dtype=_NUMPY_DTYPES[dtype])


class TensorView:
    """A zero-copy view of cache memory for DLPack consumers:
    ``torch.from_dlpack(view)`` or ``numpy.from_dlpack(view)``.  Each
    __dlpack__ call exports a new tensor that keeps the cache's memory alive
    (even past Cache.close() and Runtime.close())."""

    def __init__(self, cache, layer, part):
        self._cache, self.layer, self.part = cache, layer, part

    def _export(self):
        self._cache._check_open()
        out = C.POINTER(_lib.DLManagedTensor)()
        if self.layer is None:
            check(lib.kvrt_cache_export_layers(self._cache._h, _PARTS[self.part], C.byref(out)))
        else:
            check(lib.kvrt_cache_export_layer(self._cache._h, self.layer, _PARTS[self.part], C.byref(out)))
        return out

    def __dlpack__(self, stream=None):
        """A "dltensor" capsule.  kvrt runs no asynchronous work on consumer
        streams, so `stream` needs no synchronisation."""
        return capsule(self._export())

    def __dlpack_device__(self):
        mt = self._export()
        d = mt.contents.dl_tensor.device
        dev = (d.device_type, d.device_id)
        mt.contents.deleter(mt)
        return dev

    def __repr__(self):
        what = "all layers" if self.layer is None else "layer %d" % self.layer
        return "<kvrt.TensorView %s, %s>" % (what, self.part)


class Cache(Closeable):
    """One allocation holding every layer, laid out by a placement.  Create
    it with :meth:`Runtime.cache`.  Use as a context manager or call
    close(); views already exported stay valid."""

    def __init__(self, runtime, handle, backend_handle, layout, names, specs):
        self._rt, self._h = runtime, handle
        self.backend, self.layout = text(lib.kvrt_backend_name(backend_handle)), layout
        self._backend_h = backend_handle
        self._agents = weakref.WeakSet()  # kvrt.xfer agents: closed before the cache
        self.num_layers = lib.kvrt_cache_num_layers(handle)
        self.layer_names = [None] * self.num_layers
        self._spec = [None] * self.num_layers
        for name, spec in zip(names, specs):
            idx = C.c_uint32()
            check(lib.kvrt_cache_layer_index(handle, name, C.byref(idx)))
            self.layer_names[idx.value] = name.decode()
            si = _lib.SpecInfo()
            check(lib.kvrt_spec_derive(C.byref(spec), 0, C.byref(si)))
            self._spec[idx.value] = (spec, si)

    # -- lifetime --
    def _check_open(self):
        if not self._h:
            raise StateError("the cache is closed (views exported before still hold its memory)")

    def close(self):
        """Destroy the cache (and its transfer agents first); tensors exported
        from it keep its memory."""
        for a in list(self._agents):
            a.close()
        if self._h:
            h, self._h = self._h, None
            if self._rt._h:
                lib.kvrt_cache_destroy(h)

    def _forget(self):
        self._h = None

    # -- views --
    def _layer(self, layer):
        self._check_open()
        if isinstance(layer, str):
            idx = C.c_uint32()
            check(lib.kvrt_cache_layer_index(self._h, layer.encode(), C.byref(idx)))
            return idx.value
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < self.num_layers:
            raise InvalidArgumentError("layer %r is out of range: the cache has %d layers (valid 0..%d, or a "
                                       "layer name)" % (layer, self.num_layers, self.num_layers - 1))
        return layer

    def layer(self, layer):
        """Layer `layer` (index in placement order, or name) as a [blocks,
        head slots, states, content] view in elements."""
        return TensorView(self, self._layer(layer), "all")

    def k(self, layer):
        """The K part of an attention or MLA layer: [blocks, head slots, states, head_size]."""
        return TensorView(self, self._layer(layer), "k")

    def v(self, layer):
        """The V part of an attention layer: [blocks, head slots, states, head_size_v]."""
        return TensorView(self, self._layer(layer), "v")

    def all_layers(self, part="all"):
        """Every layer as one [layers, blocks, head slots, states, content]
        view (part "all", "k" or "v"); the layers must be evenly spaced."""
        self._check_open()
        if part not in _PARTS:
            raise InvalidArgumentError("part %r is not one of all, k, v" % (part,))
        return TensorView(self, None, part)

    # -- operations --
    def _buffer(self, nbytes):
        h = C.c_void_p()
        check(lib.kvrt_buffer_create(self._backend_h, max(1, nbytes), C.byref(h)))
        return h

    def _upload(self, b, what, dtype, shape):
        b.require(dtype=dtype, shape=shape)
        buf = self._buffer(b.nbytes)
        try:
            check(lib.kvrt_buffer_upload(buf, 0, b.address, b.nbytes))
        except BaseException:
            lib.kvrt_buffer_destroy(buf)
            raise
        return buf

    def _dims(self, layer):
        spec, si = self._spec[layer]
        return info.dtype_name(spec.dtype), si.head_slots, si.head_size, si.head_size_v

    def write(self, layer, slots, k, v=None):
        """Write K [T, H, D] and V [T, H, Dv] (host tensors of the layer's
        type) of T tokens into `layer` at `slots` (T int64; negative skips)."""
        layer = self._layer(layer)
        s, n = index_array(slots, C.c_int64, "slots")
        dtype, h, d, dv = self._dims(layer)
        bufs = []
        try:
            with Borrowed(k, "k") as bk:
                bufs.append(self._upload(bk, "k", dtype, (n, h, d)))
            if v is not None:
                with Borrowed(v, "v") as bv:
                    bufs.append(self._upload(bv, "v", dtype, (n, h, dv)))
            check(lib.kvrt_cache_write(self._h, layer, n, s, bufs[0], 0, bufs[1] if v is not None else None, 0))
        finally:
            for b in bufs:
                lib.kvrt_buffer_destroy(b)

    def read(self, layer, slots, k=None, v=None):
        """Read K and V of `slots` back: returns (k, v), new tensors unless
        given (v is None for MLA layers)."""
        layer = self._layer(layer)
        s, n = index_array(slots, C.c_int64, "slots")
        dtype, h, d, dv = self._dims(layer)
        k = _empty((n, h, d), dtype) if k is None else k
        v = (_empty((n, h, dv), dtype) if dv else None) if v is None else v
        with Borrowed(k, "k") as bk:
            bk.require(dtype=dtype, shape=(n, h, d))
            kb = self._buffer(bk.nbytes)
            vb = None
            try:
                bv = Borrowed(v, "v").require(dtype=dtype, shape=(n, h, dv)) if v is not None else None
                try:
                    if bv is not None:
                        vb = self._buffer(bv.nbytes)
                    check(lib.kvrt_cache_read(self._h, layer, n, s, kb, 0, vb, 0))
                    check(lib.kvrt_buffer_download(kb, 0, bk.address, bk.nbytes))
                    if bv is not None:
                        check(lib.kvrt_buffer_download(vb, 0, bv.address, bv.nbytes))
                finally:
                    if bv is not None:
                        bv.close()
            finally:
                lib.kvrt_buffer_destroy(kb)
                if vb:
                    lib.kvrt_buffer_destroy(vb)
        return k, v

    def copy_blocks(self, pairs):
        """Copy block pairs[2i] to pairs[2i+1] (or [(src, dst), ...]) in every layer."""
        self._check_open()
        if isinstance(pairs, (list, tuple)) and pairs and isinstance(pairs[0], (list, tuple)):
            pairs = [x for p in pairs for x in p]
        p, n = index_array(pairs, C.c_int64, "pairs")
        if n % 2:
            raise InvalidArgumentError("pairs: %d values; give (source, destination) pairs" % n)
        check(lib.kvrt_cache_copy_blocks(self._h, n // 2, p))

    def staging_bytes(self, num_blocks):
        """Bytes of the staging buffer for num_blocks blocks (all layers)."""
        self._check_open()
        out = C.c_uint64()
        check(lib.kvrt_cache_staging_bytes(self._h, whole("num_blocks", num_blocks, low=0), C.byref(out)))
        return out.value

    def gather(self, block_ids, out=None):
        """Pack blocks into a staging tensor (uint8, staging_bytes(n) long): returned."""
        self._check_open()
        ids, n = index_array(block_ids, C.c_int64, "block_ids")
        nbytes = self.staging_bytes(n)
        out = _empty((nbytes,), "uint8") if out is None else out
        with Borrowed(out, "out") as bo:
            bo.require(dtype="uint8")
            if bo.nbytes != nbytes:
                raise InvalidArgumentError("out: %d bytes; %d blocks need %d" % (bo.nbytes, n, nbytes))
            buf = self._buffer(nbytes)
            try:
                check(lib.kvrt_cache_gather(self._h, n, ids, buf, 0))
                check(lib.kvrt_buffer_download(buf, 0, bo.address, nbytes))
            finally:
                lib.kvrt_buffer_destroy(buf)
        return out

    def scatter(self, block_ids, staging):
        """Unpack a staging tensor made by gather() into blocks."""
        self._check_open()
        ids, n = index_array(block_ids, C.c_int64, "block_ids")
        nbytes = self.staging_bytes(n)
        with Borrowed(staging, "staging") as bs:
            bs.require(dtype="uint8")
            if bs.nbytes != nbytes:
                raise InvalidArgumentError("staging: %d bytes; %d blocks need %d" % (bs.nbytes, n, nbytes))
            buf = self._upload(bs, "staging", "uint8", bs.shape)
            try:
                check(lib.kvrt_cache_scatter(self._h, n, ids, buf, 0))
            finally:
                lib.kvrt_buffer_destroy(buf)

    def decode(self, layer, q, block_tables, seq_lens, scale=None, out=None):
        """Single-query paged attention on `layer`: q [S, Hq, D] in the
        layer's type, block_tables int32 [S, M], seq_lens int32 [S];
        returns out [S, Hq, Dv].  scale defaults to 1/sqrt(D)."""
        layer = self._layer(layer)
        dtype, h, d, dv = self._dims(layer)
        with Borrowed(q, "q") as bq:
            if bq.ndim != 3:
                raise InvalidArgumentError("q: shape %s; this needs [seqs, query heads, %d]" % (list(bq.shape), d))
            nseq, hq = bq.shape[0], bq.shape[1]
            tables, nt = index_array(block_tables, C.c_int32, "block_tables")
            lens, nl = index_array(seq_lens, C.c_int32, "seq_lens")
            if nl != nseq or nseq == 0 or nt % nseq:
                raise InvalidArgumentError("seq_lens has %d entries and block_tables %d for %d sequences; "
                                           "give one length and the same number of table entries per "
                                           "sequence" % (nl, nt, nseq))
            out = _empty((nseq, hq, dv or d), dtype) if out is None else out
            qb = self._upload(bq, "q", dtype, (nseq, hq, d))
            try:
                with Borrowed(out, "out") as bo:
                    bo.require(dtype=dtype, shape=(nseq, hq, dv or d))
                    ob = self._buffer(bo.nbytes)
                    try:
                        p = _lib.DecodeParams()
                        lib.kvrt_decode_params_default(C.byref(p))
                        p.num_seqs, p.num_q_heads, p.q, p.out = nseq, hq, qb, ob
                        p.block_tables = C.cast(tables, C.c_void_p)
                        p.max_blocks_per_seq = nt // nseq
                        p.seq_lens = C.cast(lens, C.c_void_p)
                        p.scale = 1.0 / math.sqrt(d) if scale is None else scale
                        check(lib.kvrt_cache_decode(self._h, layer, C.byref(p)))
                        check(lib.kvrt_buffer_download(ob, 0, bo.address, bo.nbytes))
                    finally:
                        lib.kvrt_buffer_destroy(ob)
            finally:
                lib.kvrt_buffer_destroy(qb)
        return out


def _model_file_groups(path, kv_cache_dtype, block_size, attention_backend):
    """A model file's groups as _model_groups gives them."""
    with Model(path, kv_cache_dtype, block_size, attention_backend) as m:
        groups = []
        for g in range(m.info.num_groups):
            grp = m.info.groups[g]
            groups.append([(text(grp.layers[i].name), _lib.Spec.from_buffer_copy(grp.layers[i].spec))
                           for i in range(grp.num_layers)])
        return groups


def _groups(model, kv_cache_dtype=None, block_size=None, attention_backend=None):
    """The groups of a model file or a model description."""
    if isinstance(model, (str, bytes, os.PathLike)):
        return _model_file_groups(model, kv_cache_dtype, block_size, attention_backend)
    given = [k for k, v in (("kv_cache_dtype", kv_cache_dtype), ("block_size", block_size),
                            ("attention_backend", attention_backend)) if v is not None]
    if given:
        raise InvalidArgumentError("%s applies to a model file; a dict model gives its specs itself" % given[0])
    return _model_groups(model)


class _CGroups:
    """Groups of (layer name, Spec) as struct kvrt_group entries, with every
    layer's name and spec in placement order; the arrays live as long as
    this object."""

    def __init__(self, groups):
        self.groups = (_lib.Group * len(groups))()
        self._keep, self.names, self.specs = [], [], []
        for gi, g in enumerate(groups):
            entries = (_lib.LayerEntry * len(g))()
            for li, (name, spec) in enumerate(g):
                entries[li].name = name.encode()
                entries[li].spec = spec
                self.names.append(name.encode())
                self.specs.append(spec)
            self._keep.append(entries)
            self.groups[gi] = _lib.Group(entries, len(g))


def _model_groups(model):
    """[(group name, [(layer name, Spec)])] from a model description."""
    if not isinstance(model, dict):
        raise InvalidArgumentError("model: a dict, either {\"layers\": N, <spec keywords>} or {\"groups\": "
                                   "[{\"layers\": [{\"name\": ..., <spec keywords>}, ...]}, ...]}; got %s"
                                   % type(model).__name__)
    if "groups" in model:
        groups = []
        for gi, g in enumerate(model["groups"]):
            layers = []
            for li, entry in enumerate(g["layers"] if isinstance(g, dict) else g):
                kw = dict(entry)
                name = kw.pop("name", "group%d.layer%d" % (gi, li))
                layers.append((name, info.make_spec(**kw)))
            groups.append(layers)
        return groups
    kw = dict(model)
    n = kw.pop("layers", 1)
    spec = info.make_spec(**kw)
    return [[("layer.%d" % i, spec) for i in range(n)]]


class Runtime(Closeable):
    """The kvrt runtime: plugins found at open, backends bound on demand.
    Use as a context manager or call close().  Closing destroys its caches;
    tensors exported from them keep their memory until their deleters run."""

    def __init__(self, plugin_path=None, search_default_paths=True):
        opts = _lib.RuntimeOptions()
        lib.kvrt_runtime_options_default(C.byref(opts))
        self._path = plugin_path.encode() if plugin_path is not None else None
        opts.plugin_path = self._path
        opts.search_default_paths = search_default_paths
        self._h = C.c_void_p()
        check(lib.kvrt_runtime_open(C.byref(opts), C.byref(self._h)))
        self._caches = weakref.WeakSet()

    def close(self):
        if self._h:
            for c in list(self._caches):
                for a in list(c._agents):
                    a.close()
                c._forget()
            h, self._h = self._h, C.c_void_p()
            lib.kvrt_runtime_close(h)

    def _check_open(self):
        if not self._h:
            raise StateError("the runtime is closed")

    @property
    def plugins(self):
        """Every plugin found, in search order, as dicts."""
        self._check_open()
        out = []
        for i in range(lib.kvrt_runtime_num_plugins(self._h)):
            p = _lib.PluginInfo()
            check(lib.kvrt_runtime_plugin_info(self._h, i, C.byref(p)))
            out.append({
                "name": text(p.name), "path": text(p.path), "version": text(p.version),
                "description": text(p.description), "abi": "%d.%d" % (p.abi_major, p.abi_minor),
                "layouts": "any" if p.any_layout else [info.layout_name(p.layouts[k]) for k in range(p.num_layouts)],
                "dtypes": [info.dtype_name(t) for t in range(32) if p.dtypes & (1 << t) and info.dtype_name(t)],
                "available": bool(p.available), "reason": text(p.reason),
                "device_type": text(lib.kvrt_device_type_name(p.device_type)) or "unknown",
                "memory": text(lib.kvrt_memory_kind_name(p.memory)) or "opaque",
                "device_name": text(p.device_name) or "", "import_alignment": p.import_alignment,
            })
        return out

    @property
    def trace_steps(self):
        """The runtime's resolution and selection trace as steps (dicts with
        "step", "text", and "layout"/"backend" when set), oldest first."""
        self._check_open()
        return json_answer(lib.kvrt_runtime_trace_json, self._h)

    def default_backend(self):
        """The backend binding picks without a layout constraint."""
        self._check_open()
        name = C.c_char_p()
        check(lib.kvrt_runtime_default_backend(self._h, C.byref(name)))
        return text(name.value)

    def _bind(self, backend, layout):
        b = C.c_void_p()
        check(lib.kvrt_runtime_bind_layout(self._h, backend.encode() if backend else None, layout, C.byref(b)))
        return b

    def _binding(self, cg, layout, backend):
        """(layout value, backend handle) for the groups (a _CGroups):
        `layout` as given, else resolved for `backend` and the groups, whose
        shapes libkvrt judges (None: the backend binding would choose; bound
        without a name then, so a backend whose bind fails is passed over)."""
        if layout is None:
            name = C.c_char_p()
            check(lib.kvrt_runtime_choose_backend(self._h, backend.encode() if backend else None, C.byref(name),
                                                  None))
            out = C.c_int()
            names = (C.c_char_p * 1)(name.value)
            check(lib.kvrt_runtime_resolve_groups(self._h, names, 1, cg.groups, len(cg.groups), None, C.byref(out)))
            lv = out.value
        else:
            lv = info.layout_value(layout)
        return lv, self._bind(backend, lv)

    def _placement(self, cg, lv, blocks, budget, kernel_block_size):
        """A placement handle (the caller destroys it) and the number of blocks."""
        if blocks is None:
            n = C.c_uint64()
            check(lib.kvrt_placement_blocks_for_budget(lv, cg.groups, len(cg.groups), budget, C.byref(n)))
            blocks = n.value
        p = C.c_void_p()
        check(lib.kvrt_placement_create(lv, cg.groups, len(cg.groups), blocks, kernel_block_size, C.byref(p)))
        return p, blocks

    def _adopt(self, h, bh, lv, names, specs, blocks):
        c = Cache(self, h, bh, info.layout_name(lv), names, specs)
        c.num_blocks = blocks
        self._caches.add(c)
        return c

    def cache(self, model, layout=None, blocks=None, memory=None, backend=None, kernel_block_size=0,
              kv_cache_dtype=None, block_size=None, attention_backend=None):
        """A zeroed cache for `model` on `backend` (None: KVRT_BACKEND, else
        the default backend).

        model: a model file (a config.json, a folder holding one, or a kvrt
        model file) sized as vLLM sizes it, with the tool's options
        kv_cache_dtype, block_size and attention_backend; or {"layers": N,
        <spec keywords of kvrt.plan>} for N identical layers named
        layer.0.., or {"groups": [{"layers": [{"name": ..., <spec
        keywords>}, ...]}, ...]}.  layout: a name or alias; None resolves one
        for the backend (VLLM_KV_CACHE_LAYOUT applies).  Give blocks, or
        memory (bytes) for as many blocks as fit."""
        self._check_open()
        if (blocks is None) == (memory is None):
            raise InvalidArgumentError("cache: give blocks (the number of blocks) or memory (a budget in "
                                       "bytes), exactly one of them")
        cg = _CGroups(_groups(model, kv_cache_dtype, block_size, attention_backend))
        lv, bh = self._binding(cg, layout, backend)
        p, blocks = self._placement(cg, lv, blocks, memory, kernel_block_size)
        try:
            h = C.c_void_p()
            check(lib.kvrt_cache_create(bh, p, C.byref(h)))
        finally:
            lib.kvrt_placement_destroy(p)
        return self._adopt(h, bh, lv, cg.names, cg.specs, blocks)

    def wrap(self, tensor, model, layout=None, blocks=None, backend=None, kernel_block_size=0,
             kv_cache_dtype=None, block_size=None, attention_backend=None):
        """A cache over the memory of `tensor` (torch, numpy, anything with
        __dlpack__), which keeps its bytes: the engine's own KV-cache
        allocation becomes a kvrt cache, and kvrt's operations, its views
        and the engine's kernels see the same bytes.

        tensor: the cache's bytes (contiguous, any element type), or the
        [layers, blocks, head slots, states, content] view of the whole
        cache ([blocks, ...] for one layer), whose shape and strides must be
        exactly the layout's (what Cache.all_layers() gives); a view that is
        not is refused naming the first differing axis and both values.  A
        host tensor goes to a host backend, a CUDA or ROCm tensor to the
        backend of its device.
        model, layout, backend, kernel_block_size and the model file's
        options: as for cache().  blocks:
        None for as many as the tensor's bytes hold.
        The cache holds the tensor until the cache, and every view exported
        from it, are gone; the tensor's own memory is never freed by kvrt."""
        self._check_open()
        groups = _groups(model, kv_cache_dtype, block_size, attention_backend)
        cg = _CGroups(groups)
        lv, bh = self._binding(cg, layout, backend)
        borrowed = Borrowed(tensor, "tensor")
        try:
            nlayers = sum(len(g) for g in groups)
            if blocks is None and (borrowed.ndim == 5 or (borrowed.ndim == 4 and nlayers == 1)):
                # The view of the whole cache (kvrt_cache_from_dlpack's rule):
                # its B axis counts kernel blocks.
                bs = groups[0][0][1].block_size
                blocks = borrowed.shape[borrowed.ndim - 4] // (bs // kernel_block_size if kernel_block_size else 1)
            p, blocks = self._placement(cg, lv, blocks, borrowed.nbytes, kernel_block_size)
            try:
                h = C.c_void_p()
                check(lib.kvrt_cache_from_dlpack(bh, p, borrowed.managed, C.byref(h)))
            finally:
                lib.kvrt_placement_destroy(p)
        except BaseException:
            borrowed.close()  # not taken: the producer's tensor is given back
            raise
        borrowed.release_to_kvrt()  # its deleter now runs when kvrt lets go
        return self._adopt(h, bh, lv, cg.names, cg.specs, blocks)
