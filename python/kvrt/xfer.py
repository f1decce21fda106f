"""Moving blocks between engines from Python: ctypes over libkvrt-xfer.

The asynchronous C API of ``<kvrt/xfer.h>`` as it is (docs/xfer.md): an
:class:`Agent` per cache, peers from listen/accept/connect or from metadata
blobs the engine carries itself, :meth:`Agent.post` returning a
:class:`Request` at once (``test()``, ``wait(timeout)``, ``release()``), and
the notifications a peer's completed transfers leave in this agent's queue.

Nothing moves unless somebody progresses the agent: on both sides, call
:meth:`Agent.progress` (or wait on a request, or accept) until the transfers
of interest are done, or sleep on :meth:`Agent.fileno` after :meth:`Agent.arm`
returned True.  An agent may be used from several threads (libkvrt-xfer
serialises the calls).

Errors are the package's :class:`kvrt.Error` classes with the library's own
message.  The module imports only where libkvrt-xfer was built (UCX found).
"""
import ctypes as C
import os
import weakref

from . import _lib
from . import _prom as _metrics
from . import parallel as _parallel
from ._closeable import Closeable
from ._errors import InvalidArgumentError, StateError
from ._lib import check, text
from ._indices import index_array
from ._model import whole
from .runtime import Cache

vp, u64, i32, sz, dbl = C.c_void_p, C.c_uint64, C.c_int, C.c_size_t, C.c_double
P = C.POINTER

PENDING = 1  # KVRT_XFER_PENDING
API_MAJOR = 1  # libkvrt-xfer's soname is libkvrt-xfer.so.<API major>
# The C macros mirrored above, by their C names, and the structs below (their
# _c_name): held to C by tests/python/test_structs.py, like kvrt._lib.
C_CONSTANTS = {"KVRT_XFER_PENDING": PENDING, "KVRT_XFER_API_VERSION_MAJOR": API_MAJOR}
SONAME = "libkvrt-xfer.so.%d" % API_MAJOR


LOG_FN = C.CFUNCTYPE(None, vp, i32, C.c_char_p)
INSECURE, REQUIRE_GRANTS = 1, 2  # KVRT_XFER_INSECURE, KVRT_XFER_REQUIRE_GRANTS
GRANT_READ, GRANT_WRITE = 1, 2  # KVRT_XFER_GRANT_READ, KVRT_XFER_GRANT_WRITE
C_CONSTANTS.update({"KVRT_XFER_INSECURE": INSECURE, "KVRT_XFER_REQUIRE_GRANTS": REQUIRE_GRANTS,
                    "KVRT_XFER_GRANT_READ": GRANT_READ, "KVRT_XFER_GRANT_WRITE": GRANT_WRITE})


class AgentOptions(C.Structure):
    _c_name = "kvrt_xfer_agent_options"
    _fields_ = [("size", sz), ("chunk_bytes", u64), ("staging_bytes", u64), ("timeout_s", dbl),
                ("key_file", C.c_char_p), ("allow", C.c_char_p), ("flags", C.c_uint32), ("reserved32", C.c_uint32),
                ("log", LOG_FN), ("log_user", vp), ("reserved", C.c_uint8 * 24)]


class Stats(C.Structure):
    _c_name = "kvrt_xfer_stats"
    _fields_ = [("size", sz)] + [(n, u64) for n in (
        "peers", "handles", "outgoing", "incoming", "ucx_requests", "staging_busy", "staging_chunks",
        "chunk_bytes", "registered_bytes")] + [("registration_s", dbl)] + [(n, u64) for n in (
            "completed", "failed", "bytes_sent", "bytes_received", "notifications", "refused", "violations",
            "strangers", "denied")] + [("handlers_s", dbl), ("handler_bytes", u64), ("bytes_read_in_place", u64), ("peers_read_in_place", C.c_uint32),
      ("reserved", C.c_uint8 * 4)] + [(n, u64) for n in (
          "failed_timeout", "failed_peer_closed", "failed_connection", "failed_violation", "failed_refused",
          "failed_released", "failed_other", "refused_auth", "refused_allow", "refused_busy", "refused_metadata",
          "refused_malformed", "refused_other", "refused_limit")] + [("reserved_end", C.c_uint8 * 64)]


class MetadataInfo(C.Structure):
    _c_name = "kvrt_xfer_metadata_info"
    _fields_ = [("size", sz), ("version", C.c_uint32), ("layout", i32), ("num_blocks", u64), ("num_layers", u64),
                ("num_sets", u64),
                ("cache_bytes", u64), ("cache_addressable", C.c_bool), ("chunk_bytes", u64),
                ("is_signed", C.c_bool), ("reserved", C.c_uint8 * 31)]


class XferRequest(C.Structure):
    _c_name = "kvrt_xfer_request"
    _fields_ = [("size", sz), ("direction", i32), ("method", i32), ("num_blocks", sz), ("local_ids", P(C.c_int64)),
                ("remote_ids", P(C.c_int64)), ("layer_start", u64), ("num_layers", u64),
                ("local_head_start", u64), ("remote_head_start", u64), ("num_heads", u64),
                ("notification", vp), ("notification_len", sz), ("token_start", u64), ("num_tokens", u64),
                ("remote_num_blocks", u64), ("reserved", C.c_uint8 * 40)]


class Plan(C.Structure):
    _c_name = "kvrt_xfer_plan"
    _fields_ = [("size", sz), ("method", i32)] + [(n, u64) for n in (
        "regions", "messages", "bytes", "wire_bytes", "chunks", "chunk_blocks")] + [
        ("seconds", dbl), ("why", C.c_char * 160), ("reserved", C.c_uint8 * 32)]


_SIGNATURES = {
    "kvrt_xfer_agent_options_default": ([P(AgentOptions)], None),
    "kvrt_xfer_agent_create": ([vp, vp, P(AgentOptions), P(vp)], i32),
    "kvrt_xfer_agent_destroy": ([vp], None),
    "kvrt_xfer_agent_stats": ([vp, P(Stats)], i32),
    "kvrt_xfer_agent_metrics": ([vp, vp, sz, P(sz)], i32),
    "kvrt_xfer_metadata_export": ([vp, P(vp), P(sz)], i32),
    "kvrt_xfer_metadata_parse": ([vp, sz, P(MetadataInfo)], i32),
    "kvrt_xfer_peer_load": ([vp, vp, sz, P(vp)], i32),
    "kvrt_xfer_listen": ([vp, C.c_char_p, C.c_uint16, P(C.c_uint16)], i32),
    "kvrt_xfer_accept": ([vp, dbl, P(vp)], i32),
    "kvrt_xfer_connect": ([vp, C.c_char_p, C.c_uint16, P(vp)], i32),
    "kvrt_xfer_peer_close": ([vp], None),
    "kvrt_xfer_peer_state": ([vp, P(C.c_char_p)], i32),
    "kvrt_xfer_peer_name": ([vp], C.c_char_p),
    "kvrt_xfer_grant": ([vp, C.c_uint, P(C.c_int64), sz], i32),
    "kvrt_xfer_revoke": ([vp, C.c_uint, P(C.c_int64), sz], i32),
    "kvrt_xfer_expect": ([vp, P(C.c_int64), sz], i32),
    "kvrt_xfer_agent_grant": ([vp, C.c_uint, P(C.c_int64), sz], i32),
    "kvrt_xfer_agent_revoke": ([vp, C.c_uint, P(C.c_int64), sz], i32),
    "kvrt_xfer_request_default": ([P(XferRequest)], None),
    "kvrt_xfer_plan": ([vp, vp, P(XferRequest), P(Plan)], i32),
    "kvrt_xfer_post": ([vp, vp, P(XferRequest), P(vp)], i32),
    "kvrt_xfer_test": ([vp], i32),
    "kvrt_xfer_wait": ([vp, dbl], i32),
    "kvrt_xfer_handle_plan": ([vp, P(Plan)], i32),
    "kvrt_xfer_release": ([vp], None),
    "kvrt_xfer_transfer": ([vp, vp, P(XferRequest), P(Plan)], i32),
    "kvrt_xfer_progress": ([vp], i32),
    "kvrt_xfer_event_fd": ([vp, P(i32)], i32),
    "kvrt_xfer_arm": ([vp], i32),
    "kvrt_xfer_notification": ([vp, P(vp), P(vp), P(sz)], i32),
    "kvrt_xfer_method_name": ([i32], C.c_char_p),
    "kvrt_xfer_method_parse": ([C.c_char_p, P(i32)], i32),
    "kvrt_xfer_method_valid_names": ([], C.c_char_p),
    "kvrt_xfer_tp_map": ([u64, u64, u64, u64, u64, i32, P(_lib.TpEntry), sz, P(sz)], i32),
    "kvrt_xfer_pp_layers": ([u64, u64, u64, P(u64), P(u64)], i32),
}


xlib, library_path = _lib.load(_lib.candidates("KVRT_XFER_LIBRARY", "XFER_LIBRARY", SONAME), _SIGNATURES,
                               "kvrt.xfer: cannot load libkvrt-xfer (built only where UCX was found: install "
                               "libucx-dev and rebuild); tried %s. Set KVRT_XFER_LIBRARY to its path")


def method_names():
    """The transfer methods libkvrt-xfer knows, as it spells them."""
    return text(xlib.kvrt_xfer_method_valid_names()).split(", ")


def tp_map(kv_heads, local_tp, local_rank, remote_tp, spread=0, direction="pull"):
    """kvrt.tp_map through libkvrt-xfer's kvrt_xfer_tp_map: a list of
    (remote_rank, local_head_start, remote_head_start, num_heads), each the
    head range of one request to that remote rank (``heads=(local_head_start,
    remote_head_start, num_heads)``); direction "pull" or "push" as the
    requests go.  docs/parallel.md has the rule."""
    return _parallel.map_with(xlib.kvrt_xfer_tp_map, kv_heads, local_tp, local_rank, remote_tp, spread, direction)


def pp_layers(num_layers, pp_size, rank, partition=None):
    """kvrt.pp_layers through libkvrt-xfer's kvrt_xfer_pp_layers: (start,
    count), the layer range (``layers=``) of that stage's requests.  A
    partition string is libkvrt's kvrt_pp_layers_partition."""
    return _parallel.layers_with(xlib.kvrt_xfer_pp_layers, num_layers, pp_size, rank, partition)


def _method(name):
    v = C.c_int()
    check(xlib.kvrt_xfer_method_parse(name.encode() if isinstance(name, str) else name, C.byref(v)))
    return v.value


def _as_dict(s):
    """Every field of a mirrored struct but size and reserved, by name (the
    mirror test holds the names to C's)."""
    return {name: getattr(s, name) for name, _ in s._fields_ if name not in ("size", "reserved", "reserved_end")}


def _plan_dict(p):
    d = _as_dict(p)
    d["method"], d["why"] = text(xlib.kvrt_xfer_method_name(p.method)), text(p.why)
    return d


def parse_metadata(blob):
    """What a metadata blob says, as a dict (checked, nothing connected)."""
    info = MetadataInfo()
    info.size = C.sizeof(info)
    b = bytes(blob)
    check(xlib.kvrt_xfer_metadata_parse(b, len(b), C.byref(info)))
    d = _as_dict(info)
    d["layout"] = text(_lib.lib.kvrt_layout_name(info.layout))
    return d


def _access(read, write, what):
    access = (GRANT_READ if read else 0) | (GRANT_WRITE if write else 0)
    if not access:
        raise InvalidArgumentError("%s: read and write are both False; grant at least one" % what)
    return access


def _change_grants(fn, handle, access, ids):
    """fn is one of libkvrt-xfer's grant calls; ids None: every block."""
    if ids is None:
        check(fn(handle, access, None, 0))
        return
    arr, n = index_array(ids, C.c_int64, "ids")
    check(fn(handle, access, C.cast(arr, P(C.c_int64)), n))


class Peer:
    """A connected peer of an :class:`Agent`.  close() says goodbye to it."""

    def __init__(self, agent, handle):
        # Weak: the agent owns its peers, and a cycle would leave the
        # agent's end to the garbage collector, in any order with its cache.
        self._agent_ref, self._h = weakref.ref(agent), handle
        self.name = text(xlib.kvrt_xfer_peer_name(handle))

    @property
    def _agent(self):
        a = self._agent_ref()
        if a is None or not a._h:
            raise StateError("peer %s: its agent is closed" % self.name)
        return a

    def _check_open(self):
        if not self._h:
            raise StateError("peer %s is closed" % self.name)
        self._agent  # noqa: B018 (raises when the agent is gone)

    @property
    def state(self):
        """("connected" | "closed" | "failed", reason)."""
        self._check_open()
        why = C.c_char_p()
        s = xlib.kvrt_xfer_peer_state(self._h, C.byref(why))
        return ({0: "connected", 1: "closed", 2: "failed"}.get(s, "unknown"), text(why.value) or "")

    def grant(self, ids, read=True, write=True):
        """Let this peer read (pull) and/or write (push into) these blocks of
        the agent's cache; an agent with require_grants refuses anything
        else (docs/security.md)."""
        self._check_open()
        _change_grants(xlib.kvrt_xfer_grant, self._h, _access(read, write, "grant"), ids)

    def expect(self, ids):
        """The receiving side's grant: this peer may push into these blocks."""
        self._check_open()
        arr, n = index_array(ids, C.c_int64, "ids")
        check(xlib.kvrt_xfer_expect(self._h, C.cast(arr, P(C.c_int64)), n))

    def revoke(self, ids=None, read=True, write=True):
        """Take grants back (ids None: every block)."""
        self._check_open()
        _change_grants(xlib.kvrt_xfer_revoke, self._h, _access(read, write, "revoke"), ids)

    def close(self):
        a = self._agent_ref()
        if self._h and a is not None and a._h:
            h, self._h = self._h, None
            a._peers.pop(h, None)
            xlib.kvrt_xfer_peer_close(h)
        self._h = None

    def __repr__(self):
        return "<kvrt.xfer.Peer %s>" % self.name


class Request(Closeable):
    """One posted transfer.  test() and wait() return True once it is
    complete and raise the kvrt.Error it failed with; release() (or close,
    or leaving a ``with``) gives it back, abandoning it if still under way."""

    def __init__(self, agent, handle, peer):
        self._agent, self._h, self.peer = agent, handle, peer

    def _state(self, rc):
        if rc == PENDING:
            return False
        check(rc)
        return True

    def test(self):
        """Progress once; True when complete, False while under way."""
        self._check_open()
        return self._state(xlib.kvrt_xfer_test(self._h))

    def wait(self, timeout=None):
        """Progress until the transfer ends (True) or `timeout` seconds
        pass (False); None waits until it ends (a stalled transfer fails
        after the agent's timeout)."""
        self._check_open()
        return self._state(xlib.kvrt_xfer_wait(self._h, -1.0 if timeout is None else float(timeout)))

    @property
    def plan(self):
        """The plan it runs, with "seconds" from post to completion."""
        self._check_open()
        p = Plan()
        p.size = C.sizeof(p)
        check(xlib.kvrt_xfer_handle_plan(self._h, C.byref(p)))
        return _plan_dict(p)

    def _check_open(self):
        if not self._h or not self._agent._h:
            raise StateError("the request is released")

    def release(self):
        if self._h and self._agent._h:
            h, self._h = self._h, None
            self._agent._requests.discard(h)
            xlib.kvrt_xfer_release(h)
        self._h = None

    close = release


class Agent(Closeable):
    """An agent for a :class:`kvrt.Cache`: the cache registered with UCX,
    a worker, its peers and transfers.  The keywords are struct
    kvrt_xfer_agent_options (None: defaults): chunk_bytes, staging_bytes,
    timeout (seconds); key_file (a pre-shared key: peers must prove they
    hold it; None: KVRT_XFER_KEY_FILE when set); insecure (listen on or
    connect to a non-loopback address without a key); allow (IPv4 or
    IPv6 addresses or networks peers may connect from: a list or a
    comma-separated string); require_grants (peers write and read only
    blocks granted to them: Peer.grant, Peer.expect)."""

    def __init__(self, cache, chunk_bytes=None, staging_bytes=None, timeout=None, key_file=None, insecure=False,
                 allow=None, require_grants=False):
        if not isinstance(cache, Cache):
            raise InvalidArgumentError("Agent: cache must be a kvrt.Cache; got %s" % type(cache).__name__)
        cache._check_open()
        opts = AgentOptions()
        xlib.kvrt_xfer_agent_options_default(C.byref(opts))
        if chunk_bytes is not None:
            opts.chunk_bytes = chunk_bytes
        if staging_bytes is not None:
            opts.staging_bytes = staging_bytes
        if timeout is not None:
            opts.timeout_s = timeout
        if key_file is not None:
            opts.key_file = os.fsencode(key_file)
        if allow is not None:
            items = [allow] if isinstance(allow, str) else list(allow)
            if not all(isinstance(x, str) for x in items):
                raise InvalidArgumentError("Agent: allow must be strings (IPv4 or IPv6 addresses or networks); got %r"
                                           % (allow,))
            opts.allow = ",".join(items).encode()
        opts.flags = (INSECURE if insecure else 0) | (REQUIRE_GRANTS if require_grants else 0)
        self.cache = cache
        self._h = C.c_void_p()
        self._peers, self._requests = {}, set()
        check(xlib.kvrt_xfer_agent_create(cache._backend_h, cache._h, C.byref(opts), C.byref(self._h)))
        cache._agents.add(self)

    def _check_open(self):
        if not self._h:
            raise StateError("the agent is closed")
        if not self.cache._h:
            raise StateError("the agent's cache is closed")

    def close(self):
        """Fail what is under way, close every peer, release UCX resources."""
        if self._h:
            h, self._h = self._h, C.c_void_p()
            xlib.kvrt_xfer_agent_destroy(h)
            self._peers.clear()
            self._requests.clear()

    def grant(self, ids, read=True, write=True):
        """Grants to every peer, connected and to come: for blocks any peer
        that proved the key may use, and for peers that transfer as soon as
        their connect returns, before accept() hands them to this side."""
        self._check_open()
        _change_grants(xlib.kvrt_xfer_agent_grant, self._h, _access(read, write, "grant"), ids)

    def revoke(self, ids=None, read=True, write=True):
        """Take agent-wide grants back (ids None: every block)."""
        self._check_open()
        _change_grants(xlib.kvrt_xfer_agent_revoke, self._h, _access(read, write, "revoke"), ids)

    def _peer(self, h):
        if not h:
            return None
        p = self._peers.get(h)
        if p is None:
            p = self._peers[h] = Peer(self, h)
        return p

    # -- peers --
    def listen(self, addr="127.0.0.1", port=0):
        """Listen on addr:port (0: any free port); returns the bound port.
        addr: an IPv4 or IPv6 address ("::1", "[fd00::7]", "fe80::1%eth0")
        or a host name (docs/xfer.md, "Connections")."""
        self._check_open()
        bound = C.c_uint16()
        check(xlib.kvrt_xfer_listen(self._h, addr.encode(), whole("port", port, low=0, high=65535), C.byref(bound)))
        return bound.value

    def accept(self, timeout=None):
        """The next peer that connects, or None after `timeout` seconds
        (None: the agent's timeout).  Transfers progress meanwhile."""
        self._check_open()
        h = C.c_void_p()
        rc = xlib.kvrt_xfer_accept(self._h, 0.0 if timeout is None else float(timeout), C.byref(h))
        if rc == PENDING:
            return None
        check(rc)
        return self._peer(h.value)

    def connect(self, addr, port):
        """Connect to a listening agent at addr (as listen takes it) and
        port; metadata is exchanged and checked."""
        self._check_open()
        h = C.c_void_p()
        check(xlib.kvrt_xfer_connect(self._h, addr.encode(), whole("port", port, low=0, high=65535), C.byref(h)))
        return self._peer(h.value)

    def metadata(self):
        """This agent's metadata blob (bytes) for a peer's load()."""
        self._check_open()
        blob, n = C.c_void_p(), C.c_size_t()
        check(xlib.kvrt_xfer_metadata_export(self._h, C.byref(blob), C.byref(n)))
        try:
            return C.string_at(blob, n.value)
        finally:
            _lib.lib.kvrt_free(blob)

    def load(self, blob):
        """A peer from its metadata blob, without a listener."""
        self._check_open()
        b = bytes(blob)
        h = C.c_void_p()
        check(xlib.kvrt_xfer_peer_load(self._h, b, len(b), C.byref(h)))
        return self._peer(h.value)

    # -- transfers --
    def _request(self, local_ids, remote_ids, pull, layers, heads, notification, method, tokens=None):
        loc, n = index_array(local_ids, C.c_int64, "local_ids")
        rem, m = index_array(remote_ids, C.c_int64, "remote_ids")
        r = XferRequest()
        xlib.kvrt_xfer_request_default(C.byref(r))
        if tokens is None:
            if n != m:
                raise InvalidArgumentError("local_ids has %d blocks and remote_ids %d; give one remote id per "
                                           "local id (or two block tables and tokens=(first, count))" % (n, m))
        else:
            # Block tables and a token range: libkvrt-xfer checks them.
            try:
                first, count = (tokens.start, len(tokens)) if isinstance(tokens, range) else tokens
            except (TypeError, ValueError):
                raise InvalidArgumentError("tokens: (first, count) or a range of tokens; got %r" % (tokens,))
            r.token_start = whole("tokens first", first, low=0)
            r.num_tokens = whole("tokens count", count)
            r.remote_num_blocks = m
        r.direction = 1 if pull else 0
        r.method = _method(method)
        r.num_blocks = n
        r.local_ids = C.cast(loc, P(C.c_int64))
        r.remote_ids = C.cast(rem, P(C.c_int64))
        # The ranges' fields are uint64: a value out of range is refused
        # here, where ctypes would wrap it into another layer or head.
        if layers is not None:
            try:
                start, count = (layers.start, len(layers)) if isinstance(layers, range) else layers
            except (TypeError, ValueError):
                raise InvalidArgumentError("layers: (start, count) or a range of layers; got %r" % (layers,))
            if count == 0:
                raise InvalidArgumentError("layers: an empty range; give at least one layer (None: all)")
            r.layer_start, r.num_layers = whole("layers start", start, low=0), whole("layers count", count)
        if heads is not None:
            if not isinstance(heads, (tuple, list)) or len(heads) != 3 or heads[2] == 0:
                raise InvalidArgumentError("heads: (local_start, remote_start, count) with count > 0; got %r"
                                           % (heads,))
            r.local_head_start = whole("heads local_start", heads[0], low=0)
            r.remote_head_start = whole("heads remote_start", heads[1], low=0)
            r.num_heads = whole("heads count", heads[2])
        note = bytes(notification.encode() if isinstance(notification, str) else notification or b"")
        buf = C.create_string_buffer(note, len(note)) if note else None
        if buf is not None:
            r.notification = C.cast(buf, vp)
            r.notification_len = len(note)
        return r, (loc, rem, buf)

    def plan(self, peer, local_ids, remote_ids, pull=False, layers=None, heads=None, method="auto", tokens=None):
        """Every check of post() and the plan it would run, moving nothing."""
        self._check_open()
        r, keep = self._request(local_ids, remote_ids, pull, layers, heads, None, method, tokens)
        p = Plan()
        p.size = C.sizeof(p)
        check(xlib.kvrt_xfer_plan(self._h, peer._h, C.byref(r), C.byref(p)))
        del keep
        return _plan_dict(p)

    def post(self, peer, local_ids, remote_ids, pull=False, layers=None, heads=None, notification=None,
             method="auto", tokens=None):
        """Start moving blocks local_ids -> the peer's remote_ids (pull:
        the peer's remote_ids -> local_ids) and return a :class:`Request` at
        once.  tokens: (first, count) or a range: local_ids and remote_ids
        are then each side's block table for one sequence (block ids in
        token order from token 0), and tokens [first, first + count) move
        between them whatever the two block sizes.  layers: a range, or
        (start, count), in placement order on both sides (None: all).
        heads: (local_start, remote_start, count) for tensor parallelism
        (None: all heads, alike on both sides).  notification: bytes or str
        the peer receives once the data is complete.  method: see
        method_names() ("auto" chooses)."""
        self._check_open()
        if not isinstance(peer, Peer) or peer._agent_ref() is not self:
            raise InvalidArgumentError("post: peer must be a Peer of this agent")
        peer._check_open()
        r, keep = self._request(local_ids, remote_ids, pull, layers, heads, notification, method, tokens)
        h = C.c_void_p()
        check(xlib.kvrt_xfer_post(self._h, peer._h, C.byref(r), C.byref(h)))
        del keep  # kvrt_xfer_post copied the arrays and the notification
        self._requests.add(h.value)
        return Request(self, h.value, peer)

    def transfer(self, peer, local_ids, remote_ids, **kw):
        """post() and wait until the transfer ends; returns its plan."""
        with self.post(peer, local_ids, remote_ids, **kw) as req:
            req.wait()
            return req.plan

    # -- progress and notifications --
    def progress(self):
        """Advance every transfer of the agent and serve its peers."""
        self._check_open()
        check(xlib.kvrt_xfer_progress(self._h))

    def fileno(self):
        """A descriptor that becomes readable when the agent has work
        (select/poll it after arm() returned True)."""
        self._check_open()
        fd = C.c_int()
        check(xlib.kvrt_xfer_event_fd(self._h, C.byref(fd)))
        return fd.value

    def arm(self):
        """Progress, then arm the descriptor: True when armed (sleep on
        fileno()), False when there is work now (call again)."""
        self._check_open()
        rc = xlib.kvrt_xfer_arm(self._h)
        if rc == PENDING:
            return False
        check(rc)
        return True

    def notification(self):
        """The oldest notification as (peer, bytes), or None."""
        self._check_open()
        frm, msg, n = C.c_void_p(), C.c_void_p(), C.c_size_t()
        check(xlib.kvrt_xfer_notification(self._h, C.byref(frm), C.byref(msg), C.byref(n)))
        if not msg.value:
            return None
        try:
            data = C.string_at(msg, n.value)
        finally:
            _lib.lib.kvrt_free(msg)
        return self._peer(frm.value), data

    def notifications(self):
        """Every queued notification, oldest first."""
        out = []
        while True:
            n = self.notification()
            if n is None:
                return out
            out.append(n)

    @property
    def stats(self):
        """What the agent holds and has done (struct kvrt_xfer_stats)."""
        self._check_open()
        s = Stats()
        s.size = C.sizeof(s)
        check(xlib.kvrt_xfer_agent_stats(self._h, C.byref(s)))
        return _as_dict(s)

    def metrics(self):
        """The agent's stats in Prometheus' text format
        (kvrt_xfer_agent_metrics; docs/xfer.md, "Metrics")."""
        self._check_open()
        return _metrics.text_of(xlib.kvrt_xfer_agent_metrics, self._h)
