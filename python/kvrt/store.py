"""A KV store that outlives the engine, from Python: ctypes over
libkvrt-store (docs/store.md).

    import kvrt
    with kvrt.Store("/var/cache/kvrt", model=MODEL, model_id="llama-3.1-8b@0e9e39f") as store:
        hit = store.lookup(tokens, heads=(0, 8))          # leading tokens stored for these heads
        got = store.get(cache, block_table, tokens, heads=(0, 8))
        ...                                               # prefill tokens[got:]
        store.put(cache, block_table, tokens, heads=(0, 8))

``model`` is the whole model (every layer, every KV head): a model file
(a config.json, a folder holding one, or a kvrt model file) or a dict as
Runtime.cache takes it.  A cache may hold a slice of the heads
(``heads=(start, count)``, or ``tp=(tp_size, rank)`` for libkvrt's
tensor-parallel rule), in any layout and block size.  put_async and
get_async return a :class:`Request` at once (``test()``, ``wait()``,
``release()``).  Errors are the package's :class:`kvrt.Error` classes with
the library's message.  The module imports only where libkvrt-store was
built.
"""
import ctypes as C
import json
import os

from . import _lib
from . import _prom as _metrics
from ._closeable import Closeable
from ._errors import InvalidArgumentError, StateError
from ._indices import index_array
from ._lib import check, text
from ._model import whole
from .runtime import Cache, _CGroups, _groups

vp, u64, u32, i32, sz, dbl = C.c_void_p, C.c_uint64, C.c_uint32, C.c_int, C.c_size_t, C.c_double
P = C.POINTER

PENDING = 1  # KVRT_STORE_PENDING
API_MAJOR = 1  # libkvrt-store's soname is libkvrt-store.so.<API major>
KEY_BYTES = 32
# The C macros mirrored above, by their C names, and the structs below (their
# _c_name): held to C by tests/python/test_structs.py, like kvrt._lib.
C_CONSTANTS = {"KVRT_STORE_PENDING": PENDING, "KVRT_STORE_API_VERSION_MAJOR": API_MAJOR,
               "KVRT_STORE_KEY_BYTES": KEY_BYTES}
SONAME = "libkvrt-store.so.%d" % API_MAJOR

LOG_FN = C.CFUNCTYPE(None, vp, i32, C.c_char_p)


class StoreOptions(C.Structure):
    _c_name = "kvrt_store_options"
    _fields_ = [("size", sz), ("groups", P(_lib.Group)), ("num_groups", sz), ("model_id", C.c_char_p),
                ("chunk_tokens", u64), ("memory_bytes", u64), ("path", C.c_char_p), ("disk_bytes", u64),
                ("shared", C.c_char_p), ("shared_timeout_s", dbl), ("queue_bytes", u64), ("log", LOG_FN),
                ("log_user", vp), ("shared_password_file", C.c_char_p), ("shared_ca_file", C.c_char_p),
                ("shared_cert_file", C.c_char_p), ("shared_cert_key_file", C.c_char_p), ("key_file", C.c_char_p),
                ("events", C.c_char_p), ("events_replay", C.c_char_p), ("layers_per_entry", u64)]


class Span(C.Structure):
    _c_name = "kvrt_store_span"
    _fields_ = [("size", sz), ("cache", vp), ("block_table", P(C.c_int64)), ("num_blocks", u64),
                ("tokens", P(C.c_int32)), ("num_tokens", u64), ("first", u64), ("count", u64),
                ("head_start", u64), ("num_heads", u64), ("replica", u64), ("layer_start", u64),
                ("num_layers", u64), ("reserved", C.c_uint8 * 40)]


class Stats(C.Structure):
    _c_name = "kvrt_store_stats"
    _fields_ = [("size", sz)] + [(n, u64) for n in (
        "chunk_tokens", "num_layers", "num_heads", "entry_bytes", "memory_entries", "memory_bytes",
        "memory_capacity", "disk_entries", "disk_bytes", "disk_capacity", "queued_entries", "queued_bytes",
        "hits_memory", "hits_disk", "hits_shared", "misses", "put_entries", "put_present", "evicted_memory",
        "evicted_disk", "written_disk", "written_shared", "write_failures", "dropped")] + [
        ("shared_up", u32), ("reserved_a", C.c_uint8 * 4), ("rejected", u64),
        ("shared_nodes_down", u64), ("shared_failovers", u64), ("shared_map_refreshes", u64),
        ("shared_moved", u64), ("shared_ask", u64), ("reserved", C.c_uint8 * 8)]


class EntryInfo(C.Structure):
    _c_name = "kvrt_store_entry_info"
    _fields_ = [("size", sz), ("key", C.c_uint8 * KEY_BYTES), ("head", u64), ("bytes", u64), ("last_used", u64),
                ("reserved", C.c_uint8 * 32)]


class VerifyReport(C.Structure):
    _c_name = "kvrt_store_verify_report"
    _fields_ = [("size", sz), ("entries", u64), ("bad", u64), ("dropped", u64), ("sealed", u64),
                ("reserved", C.c_uint8 * 24)]


EACH_FN = C.CFUNCTYPE(i32, vp, P(EntryInfo))
BAD_FN = C.CFUNCTYPE(None, vp, P(EntryInfo), C.c_char_p)

_SIGNATURES = {
    "kvrt_store_options_default": ([P(StoreOptions)], None),
    "kvrt_store_open": ([P(StoreOptions), P(vp)], i32),
    "kvrt_store_close": ([vp], None),
    "kvrt_store_flush": ([vp], i32),
    "kvrt_store_span_default": ([P(Span)], None),
    "kvrt_store_span_tp": ([vp, P(Span), u64, u64], i32),
    "kvrt_store_put": ([vp, P(Span), P(u64)], i32),
    "kvrt_store_get": ([vp, P(Span), P(u64)], i32),
    "kvrt_store_lookup": ([vp, P(C.c_int32), u64, u64, u64, P(u64)], i32),
    "kvrt_store_lookup_layers": ([vp, P(C.c_int32), u64, u64, u64, u64, u64, P(u64)], i32),
    "kvrt_store_put_post": ([vp, P(Span), P(vp)], i32),
    "kvrt_store_get_post": ([vp, P(Span), P(vp)], i32),
    "kvrt_store_test": ([vp, P(u64)], i32),
    "kvrt_store_wait": ([vp, dbl, P(u64)], i32),
    "kvrt_store_release": ([vp], None),
    "kvrt_store_keys": ([vp, P(C.c_int32), u64, P(C.c_uint8), u64, P(u64)], i32),
    "kvrt_store_stats": ([vp, P(Stats)], i32),
    "kvrt_store_describe_json": ([vp, P(vp)], i32),
    "kvrt_store_list": ([vp, EACH_FN, vp], i32),
    "kvrt_store_verify": ([vp, C.c_bool, BAD_FN, vp, P(VerifyReport)], i32),
    "kvrt_store_gc": ([vp, u64, P(u64)], i32),
    "kvrt_store_metrics": ([vp, vp, sz, P(sz)], i32),
}


slib, library_path = _lib.load(_lib.candidates("KVRT_STORE_LIBRARY", "STORE_LIBRARY", SONAME), _SIGNATURES,
                               "kvrt.store: cannot load libkvrt-store (built only where liblmdb-dev, "
                               "libssl-dev, libxxhash-dev, libzmq3-dev and libmsgpack-dev were found: install "
                               "them and rebuild); tried %s. Set KVRT_STORE_LIBRARY to its path")


def _as_dict(s):
    return {name: getattr(s, name) for name, _ in s._fields_ if name not in ("size", "reserved", "reserved_a")}


def _entry(e):
    return {"key": bytes(e.key).hex(), "head": e.head, "bytes": e.bytes, "last_used": e.last_used}


class Request:
    """A posted put or get.  ``test()`` is True once it is complete (raising
    its error if it failed), ``wait(timeout=None)`` waits (None: until it is
    done; False when the time passed first), ``tokens`` the tokens stored or
    loaded, ``release()`` gives it back (waiting for one still running).
    It holds the cache and the arrays it reads until released."""

    def __init__(self, handle, keep):
        self._h, self._keep, self.tokens = handle, keep, None

    def _result(self, rc, out):
        if rc == PENDING:
            return False
        check(rc)
        self.tokens = out.value
        return True

    def test(self):
        if not self._h:
            raise StateError("the request was released")
        out = u64()
        return self._result(slib.kvrt_store_test(self._h, C.byref(out)), out)

    def wait(self, timeout=None):
        if not self._h:
            raise StateError("the request was released")
        out = u64()
        return self._result(slib.kvrt_store_wait(self._h, -1.0 if timeout is None else float(timeout),
                                                 C.byref(out)), out)

    def release(self):
        if self._h:
            h, self._h = self._h, None
            slib.kvrt_store_release(h)
            self._keep = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


class Store(Closeable):
    """A store of one model: a memory tier, a disk tier in `path` (None:
    none) and a shared tier on a Redis-protocol server or a Redis Cluster
    (``shared="redis://[USER@]HOST:PORT[,HOST:PORT...]"``, ``rediss://``
    for TLS).  ``model=None`` opens the folder as it is, to inspect it
    (describe, entries, verify, gc).

    key_file names the tenant secret (a file of 32+ bytes only its owner
    reads; None: KVRT_STORE_KEY_FILE, else none): keys become keyed and
    entries leaving the process sealed (docs/security.md, "The store").
    memory_bytes, disk_bytes, queue_bytes, shared_timeout and the shared
    tier's files (shared_password_file, shared_ca_file, shared_cert_file,
    shared_cert_key_file) are the C options (None: libkvrt-store's defaults; docs/store.md); model file
    options (kv_cache_dtype, block_size, attention_backend) as for
    Runtime.cache.  ``events="tcp://*:5557"`` publishes vLLM's KV events
    for routers there, ``events_replay="tcp://*:5558"`` serves missed
    batches again (docs/store.md, "KV events").  ``layers_per_entry=G``
    cuts the layers into groups of G per entry, so that pipeline stages
    store and load their own layers (None or 0: every layer in one entry;
    docs/store.md, "Pipeline parallelism")."""

    def __init__(self, path, model=None, model_id=None, chunk_tokens=256, memory_bytes=None, disk_bytes=None,
                 shared=None, shared_timeout=None, queue_bytes=None, kv_cache_dtype=None, block_size=None,
                 attention_backend=None, shared_password_file=None, shared_ca_file=None, shared_cert_file=None,
                 shared_cert_key_file=None, key_file=None, events=None, events_replay=None, layers_per_entry=None):
        self._h = C.c_void_p()
        o = StoreOptions()
        slib.kvrt_store_options_default(C.byref(o))
        if path is not None and not isinstance(path, (str, bytes, os.PathLike)):
            raise InvalidArgumentError("path: a folder for the disk tier, or None for none; got %s"
                                       % type(path).__name__)
        self._path = os.fsencode(path) if path is not None else None
        o.path = self._path
        if model is not None:
            self._groups = _CGroups(_groups(model, kv_cache_dtype, block_size, attention_backend))
            o.groups, o.num_groups = self._groups.groups, len(self._groups.groups)
            if not isinstance(model_id, str) or not model_id:
                raise InvalidArgumentError("model_id: the model's id or revision as text; got %r" % (model_id,))
        self._model_id = model_id.encode() if isinstance(model_id, str) else None
        o.model_id = self._model_id
        o.chunk_tokens = whole("chunk_tokens", chunk_tokens, high=1 << 20) if model is not None else 0
        if layers_per_entry is not None:
            o.layers_per_entry = whole("layers_per_entry", layers_per_entry, low=0)
        if memory_bytes is not None:
            o.memory_bytes = whole("memory_bytes", memory_bytes, low=0)
        if disk_bytes is not None:
            o.disk_bytes = whole("disk_bytes", disk_bytes, low=0)
        if queue_bytes is not None:
            o.queue_bytes = whole("queue_bytes", queue_bytes, low=0)
        if shared_timeout is not None:
            o.shared_timeout_s = float(shared_timeout)
        if shared is not None and not isinstance(shared, str):
            raise InvalidArgumentError("shared: \"redis://[USER@]HOST:PORT[,HOST:PORT...]\" (or rediss://) or None; "
                                       "got %r" % (shared,))
        self._shared = shared.encode() if shared else None
        o.shared = self._shared
        self._files = []
        for name, value in (("shared_password_file", shared_password_file), ("shared_ca_file", shared_ca_file),
                            ("shared_cert_file", shared_cert_file), ("shared_cert_key_file", shared_cert_key_file)):
            if value is None:
                continue
            if not isinstance(value, (str, bytes, os.PathLike)):
                raise InvalidArgumentError("%s: a file's path or None; got %r" % (name, value))
            self._files.append(os.fsencode(value))
            setattr(o, name, self._files[-1])
        if key_file is not None and not isinstance(key_file, (str, bytes, os.PathLike)):
            raise InvalidArgumentError("key_file: the tenant secret's file, or None; got %s" % type(key_file).__name__)
        self._key_file = os.fsencode(key_file) if key_file is not None else None
        o.key_file = self._key_file
        for name, value in (("events", events), ("events_replay", events_replay)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError("%s: a ZeroMQ endpoint such as \"tcp://*:5557\", or None; got %r"
                                           % (name, value))
        self._events = events.encode() if events is not None else None
        self._events_replay = events_replay.encode() if events_replay is not None else None
        o.events, o.events_replay = self._events, self._events_replay
        check(slib.kvrt_store_open(C.byref(o), C.byref(self._h)))
        self._requests = []

    def close(self):
        """Wait for posted requests, flush the queue to the disk and shared
        tiers, close."""
        if self._h:
            h, self._h = self._h, C.c_void_p()
            slib.kvrt_store_close(h)

    def _check_open(self):
        if not self._h:
            raise StateError("the store is closed")

    # -- operations --
    @staticmethod
    def _layers(layers):
        """(start, count) of the model's layers, as given or as
        kvrt.pp_layers() returns them; None: all."""
        if layers is None:
            return 0, 0
        if not isinstance(layers, (tuple, list)) or len(layers) != 2:
            raise InvalidArgumentError("layers: (start, count) of the model's layers, as kvrt.pp_layers gives; "
                                       "got %r" % (layers,))
        return whole("layers start", layers[0], low=0), whole("layers count", layers[1])

    def _span(self, cache, block_table, tokens, first, count, heads, tp, replica, layers=None):
        self._check_open()
        if not isinstance(cache, Cache):
            raise InvalidArgumentError("cache: a kvrt Cache (Runtime.cache or Runtime.wrap); got %s"
                                       % type(cache).__name__)
        cache._check_open()
        table, nb = index_array(block_table, C.c_int64, "block_table")
        tok, nt = index_array(tokens, C.c_int32, "tokens")
        sp = Span()
        slib.kvrt_store_span_default(C.byref(sp))
        sp.cache = cache._h
        sp.block_table, sp.num_blocks = table, nb
        sp.tokens, sp.num_tokens = tok, nt
        sp.first = whole("first", first, low=0)
        sp.count = _lib.UNSET if count is None else whole("count", count, low=0)
        if heads is not None and tp is not None:
            raise InvalidArgumentError("give heads=(start, count) or tp=(tp_size, rank), not both")
        if tp is not None:
            if not isinstance(tp, (tuple, list)) or len(tp) != 2:
                raise InvalidArgumentError("tp: (tp_size, rank); got %r" % (tp,))
            check(slib.kvrt_store_span_tp(self._h, C.byref(sp), whole("tp_size", tp[0]),
                                          whole("rank", tp[1], low=0)))
        elif heads is not None:
            if not isinstance(heads, (tuple, list)) or len(heads) != 2:
                raise InvalidArgumentError("heads: (start, count) of the model's KV heads; got %r" % (heads,))
            sp.head_start, sp.num_heads = whole("heads start", heads[0], low=0), whole("heads count", heads[1])
        if replica is not None:
            sp.replica = whole("replica", replica, low=0)
        sp.layer_start, sp.num_layers = self._layers(layers)
        return sp, (cache, table, tok)

    def put(self, cache, block_table, tokens, first=0, count=None, heads=None, tp=None, replica=None, layers=None):
        """Store the whole chunks of tokens [first, first + count) (count
        None: to the end) of the sequence whose block table and token ids
        are given, every head the cache holds; returns the tokens of the
        range's whole chunks now stored.  Entries reach the disk and shared
        tiers in the background (flush() waits for them).  layers=(start,
        count): the model's layers the cache holds (a pipeline stage's,
        kvrt.pp_layers()), whole layer groups; None: all."""
        sp, keep = self._span(cache, block_table, tokens, first, count, heads, tp, replica, layers)
        out = u64()
        check(slib.kvrt_store_put(self._h, C.byref(sp), C.byref(out)))
        return out.value

    def get(self, cache, block_table, tokens, first=0, count=None, heads=None, tp=None, layers=None):
        """Load the leading stored chunks of the range into the cache;
        returns the tokens loaded (a multiple of chunk_tokens, from first).
        layers as for put()."""
        sp, keep = self._span(cache, block_table, tokens, first, count, heads, tp, None, layers)
        out = u64()
        check(slib.kvrt_store_get(self._h, C.byref(sp), C.byref(out)))
        return out.value

    def _post(self, fn, args):
        sp, keep = self._span(*args)
        h = C.c_void_p()
        check(fn(self._h, C.byref(sp), C.byref(h)))
        return Request(h, keep)

    def put_async(self, cache, block_table, tokens, first=0, count=None, heads=None, tp=None, replica=None,
                  layers=None):
        """put(), posted: a Request at once; the copy runs on the store's
        worker thread (the engine must not write the range's blocks until
        it is complete)."""
        return self._post(slib.kvrt_store_put_post,
                          (cache, block_table, tokens, first, count, heads, tp, replica, layers))

    def get_async(self, cache, block_table, tokens, first=0, count=None, heads=None, tp=None, layers=None):
        """get(), posted: a Request at once (the range's blocks must not be
        read until it is complete)."""
        return self._post(slib.kvrt_store_get_post,
                          (cache, block_table, tokens, first, count, heads, tp, None, layers))

    def lookup(self, tokens, heads=None, tp=None, layers=None):
        """How many leading tokens of the sequence are stored, in any tier,
        for every one of the heads (None: all the model's) and of the
        layers (start, count) (None: all; a pipeline stage's,
        kvrt.pp_layers())."""
        self._check_open()
        tok, nt = index_array(tokens, C.c_int32, "tokens")
        start, n = 0, 0
        if tp is not None:
            sp = Span()
            slib.kvrt_store_span_default(C.byref(sp))
            check(slib.kvrt_store_span_tp(self._h, C.byref(sp), whole("tp_size", tp[0]), whole("rank", tp[1], low=0)))
            start, n = sp.head_start, sp.num_heads
        elif heads is not None:
            start, n = whole("heads start", heads[0], low=0), whole("heads count", heads[1])
        ls, ln = self._layers(layers)
        out = u64()
        check(slib.kvrt_store_lookup_layers(self._h, tok, nt, start, n, ls, ln, C.byref(out)))
        return out.value

    def flush(self):
        """Wait until everything put so far is in the disk and shared tiers
        (raises DeviceError naming what the disk could not take)."""
        self._check_open()
        check(slib.kvrt_store_flush(self._h))

    def keys(self, tokens):
        """The keys of the sequence's whole chunks, as bytes (docs/store.md)."""
        self._check_open()
        tok, nt = index_array(tokens, C.c_int32, "tokens")
        n = u64()
        check(slib.kvrt_store_keys(self._h, tok, nt, None, 0, C.byref(n)))
        buf = (C.c_uint8 * max(1, n.value * KEY_BYTES))()
        check(slib.kvrt_store_keys(self._h, tok, nt, buf, n.value, None))
        return [bytes(buf[i * KEY_BYTES:(i + 1) * KEY_BYTES]) for i in range(n.value)]

    @property
    def stats(self):
        """What the store holds and has done, as a dict (kvrt_store_stats)."""
        self._check_open()
        s = Stats()
        s.size = C.sizeof(s)
        check(slib.kvrt_store_stats(self._h, C.byref(s)))
        d = _as_dict(s)
        d["shared_up"] = bool(s.shared_up)
        return d

    def metrics(self):
        """The store's counters in Prometheus' text format
        (kvrt_store_metrics; docs/store.md, "Metrics")."""
        self._check_open()
        return _metrics.text_of(slib.kvrt_store_metrics, self._h)

    # -- the disk tier as it is --
    def describe(self):
        """`kvrt store stat --json`: the format, the model, each tier."""
        self._check_open()
        out = C.c_void_p()
        check(slib.kvrt_store_describe_json(self._h, C.byref(out)))
        try:
            return json.loads(C.string_at(out.value).decode("utf-8"))
        finally:
            _lib.lib.kvrt_free(out)

    def entries(self):
        """Every entry of the disk tier in key order: dicts of key (hex),
        head, bytes and last_used."""
        self._check_open()
        found = []

        def each(_user, e):
            found.append(_entry(e.contents))
            return 0
        check(slib.kvrt_store_list(self._h, EACH_FN(each), None))
        return found

    def verify(self, drop=False):
        """Check every entry of the disk tier: a dict of entries, bad,
        dropped and problems (entry dicts with "why")."""
        self._check_open()
        problems = []

        def bad(_user, e, why):
            d = _entry(e.contents)
            d["why"] = text(why)
            problems.append(d)
        r = VerifyReport()
        r.size = C.sizeof(r)
        check(slib.kvrt_store_verify(self._h, bool(drop), BAD_FN(bad), None, C.byref(r)))
        d = _as_dict(r)
        d["problems"] = problems
        return d

    def gc(self, target_bytes=0):
        """Evict least recently used entries of the disk tier down to
        target_bytes (0: its capacity); the number evicted."""
        self._check_open()
        out = u64()
        check(slib.kvrt_store_gc(self._h, whole("target_bytes", target_bytes, low=0), C.byref(out)))
        return out.value
