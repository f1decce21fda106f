"""kvrt.xfer: the asynchronous transfer API from Python, two agents in this
process (each with its own UCX worker; a thread progresses the receiving
one, as a second engine would)."""
import os
import select
import threading
import time

import torch

import kvrt
from common import Skip, model, raises

try:
    import kvrt.xfer as kx
except ImportError as e:  # libkvrt-xfer is built only where UCX is found
    kx = None
    _why = str(e)


def _need():
    if kx is None:
        raise Skip(_why)
    os.environ.setdefault("UCX_TLS", "tcp")
    os.environ.setdefault("UCX_NET_DEVICES", "lo")


class Pair:
    """Agent `a` (sender, layout la) connected to agent `b` (receiver, lb)."""

    def __init__(self, rt, la="HND", lb="BLNHC", heads_a=2, heads_b=2, blocks=8, a_options=None, b_options=None):
        self.ca = rt.cache(model=model(kv_heads=heads_a, dtype="fp32"), layout=la, blocks=blocks, backend="cpu")
        self.cb = rt.cache(model=model(kv_heads=heads_b, dtype="fp32"), layout=lb, blocks=blocks, backend="cpu")
        self.a = kx.Agent(self.ca, timeout=20, **(a_options or {}))
        self.b = kx.Agent(self.cb, timeout=20, **(b_options or {}))
        port = self.b.listen("127.0.0.1", 0)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("peer", self.b.accept(timeout=20)))
        t.start()
        self.peer = self.a.connect("127.0.0.1", port)
        t.join()
        self.b_peer = got["peer"]
        assert self.b_peer is not None, "accept saw no peer"
        self._stop = False
        self.served_errors = []
        self._t = threading.Thread(target=self._serve)
        self._t.start()

    def _serve(self):
        # progress reports a peer's transfer this side refused (the peer
        # was told); an engine logs it and goes on serving, and so does this
        while not self._stop:
            try:
                self.b.progress()
            except kvrt.Error as e:
                self.served_errors.append(e)
            time.sleep(0.0005)

    def close(self):
        self._stop = True
        self._t.join()
        self.a.close()
        self.b.close()


def _fill(cache, layer, block, value):
    torch.from_dlpack(cache.k(layer))[block].fill_(value)
    torch.from_dlpack(cache.v(layer))[block].fill_(-value)


def test_push_converts_and_notifies():
    """push between two layouts: bytes land converted, one notification with the message, stats count it"""
    _need()
    with kvrt.Runtime() as rt:
        p = Pair(rt)
        try:
            for l in range(4):
                _fill(p.ca, l, 3, 10 + l)
                _fill(p.ca, l, 5, 20 + l)
            req = p.a.post(p.peer, [3, 5], [6, 1], notification=b"seq-7 done")
            assert req.wait(20) is True
            plan = req.plan
            assert plan["bytes"] == 2 * p.ca.staging_bytes(1), plan
            assert plan["method"] in kx.method_names() and plan["method"] != "auto", plan
            req.release()
            deadline = time.time() + 10
            note = None
            while note is None and time.time() < deadline:
                note = p.b.notification()
            assert note is not None and note[1] == b"seq-7 done", note
            assert note[0] is p.b_peer
            for l in range(4):
                kb, vb = torch.from_dlpack(p.cb.k(l)), torch.from_dlpack(p.cb.v(l))
                assert bool((kb[6] == 10 + l).all()) and bool((vb[6] == -(10 + l)).all())
                assert bool((kb[1] == 20 + l).all()) and bool((kb[0] == 0).all())
            assert p.b.stats["bytes_received"] == plan["bytes"]
        finally:
            p.close()


def test_many_in_flight_and_pull():
    """eight pushes in flight complete independently; a pull brings blocks back"""
    _need()
    with kvrt.Runtime() as rt:
        p = Pair(rt, la="BLHNC", lb="BLHNC")
        try:
            for b in range(8):
                _fill(p.ca, 0, b, b + 1)
            reqs = [p.a.post(p.peer, [b], [7 - b], layers=range(0, 1)) for b in range(8)]
            assert all(r.wait(20) for r in reqs)
            for r in reqs:
                r.release()
            kb = torch.from_dlpack(p.cb.k(0))
            assert [float(kb[7 - b][0, 0, 0]) for b in range(8)] == [b + 1.0 for b in range(8)]
            # and back: the receiver's block 0 (the sender's 7) pulled into the sender's block 2
            _fill(p.ca, 0, 2, 0)
            with p.a.post(p.peer, [2], [0], pull=True, layers=(0, 1)) as r:
                assert r.wait(20)
            assert float(torch.from_dlpack(p.ca.k(0))[2][0, 0, 0]) == 8.0
        finally:
            p.close()


def test_head_ranges():
    """a rank with one KV head pushes it into head 1 of a two-head peer"""
    _need()
    with kvrt.Runtime() as rt:
        p = Pair(rt, heads_a=1, heads_b=2)
        try:
            _fill(p.ca, 1, 4, 5)
            with p.a.post(p.peer, [4], [2], heads=(0, 1, 1)) as r:
                assert r.wait(20)
            kb = torch.from_dlpack(p.cb.k(1))[2]  # [heads, tokens, D]
            assert bool((kb[1] == 5).all()) and bool((kb[0] == 0).all())
        finally:
            p.close()


def test_refusals_name_the_value():
    """bad ids, methods, ranges and mismatched lists are refused before anything moves"""
    _need()
    with kvrt.Runtime() as rt:
        p = Pair(rt)
        try:
            e = raises(kvrt.InvalidArgumentError, p.a.post, p.peer, [0], [99])
            assert "99" in str(e) and "0..7" in str(e), e
            e = raises(kvrt.InvalidArgumentError, p.a.post, p.peer, [0], [1], method="fastest")
            assert "fastest" in str(e) and ", ".join(kx.method_names()) in str(e), e
            e = raises(kvrt.InvalidArgumentError, p.a.post, p.peer, [0, 1], [1])
            assert "2" in str(e) and "1" in str(e), e
            raises(kvrt.InvalidArgumentError, p.a.post, p.peer, [0], [1], heads=(0, 0, 0))
            raises(kvrt.InvalidArgumentError, p.a.post, p.peer, [0], [1], layers=range(9, 12))
            assert p.a.stats["handles"] == 0
            assert p.a.plan(p.peer, [0], [1])["bytes"] > 0
        finally:
            p.close()


def test_metadata_and_load():
    """metadata blobs describe the cache; two agents connect by loading each other's"""
    _need()
    with kvrt.Runtime() as rt:
        ca = rt.cache(model=model(dtype="fp32"), layout="NHD", blocks=4, backend="cpu")
        cb = rt.cache(model=model(dtype="fp32"), layout="BHLNC", blocks=4, backend="cpu")
        with kx.Agent(ca) as a, kx.Agent(cb) as b:
            info = kx.parse_metadata(a.metadata())
            assert info["layout"] == "LBNHC" and info["num_layers"] == 4 and info["num_blocks"] == 4, info
            raises(kvrt.InvalidArgumentError, kx.parse_metadata, b"not a blob")
            pa, pb = a.load(b.metadata()), b.load(a.metadata())
            _fill(ca, 2, 1, 3)
            req = a.post(pa, [1], [3], notification="x")
            while not req.test():
                b.progress()
            req.release()
            deadline = time.time() + 10
            note = None
            while note is None and time.time() < deadline:
                b.progress()
                note = b.notification()
            assert note is not None and note[0] is pb and note[1] == b"x"
            assert float(torch.from_dlpack(cb.k(2))[3][0, 0, 0]) == 3.0


def test_event_fd_and_lifetime():
    """arm() + select on fileno(); closed agents and released requests refuse further use"""
    _need()
    with kvrt.Runtime() as rt:
        c = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        a = kx.Agent(c)
        fd = a.fileno()
        assert isinstance(fd, int) and fd >= 0
        armed = a.arm()
        assert armed in (True, False)
        if armed:
            r, _, _ = select.select([fd], [], [], 0.05)  # nothing to do: no event
        a.close()
        a.close()  # idempotent
        raises(kvrt.StateError, a.progress)
        a2 = kx.Agent(c)
        c.close()  # closes its agents first
        raises(kvrt.StateError, a2.metadata)
        raises(kvrt.InvalidArgumentError, kx.Agent, "not a cache")


def test_engine_owned_memory():
    """a cache over the engine's own torch tensor (Runtime.wrap) is registered and written in place; the
    tensor is the engine's again, untouched by kvrt's teardown, once the cache and its agent are gone"""
    _need()
    with kvrt.Runtime() as rt:
        m = model(dtype="fp32")
        ca = rt.cache(model=m, layout="HND", blocks=8, backend="cpu")
        per_block = ca.staging_bytes(1)  # no padding in this model: the bytes of one block
        owned = torch.zeros(8 * per_block, dtype=torch.int8)  # as vLLM allocates: one raw byte tensor
        cb = rt.wrap(owned, model=m, layout="BLNHC", backend="cpu")
        a, b = kx.Agent(ca, timeout=20), kx.Agent(cb, timeout=20)
        try:
            assert b.stats["registered_bytes"] >= owned.numel(), b.stats
            pa, pb = a.load(b.metadata()), b.load(a.metadata())
            for l in range(4):
                _fill(ca, l, 2, 5 + l)
            req = a.post(pa, [2], [6], notification=b"owned")
            deadline = time.time() + 20
            while not req.test() and time.time() < deadline:
                b.progress()
            assert req.wait(1) is True
            req.release()
            note = None
            while note is None and time.time() < deadline:
                b.progress()
                note = b.notification()
            assert note is not None and note[0] is pb and note[1] == b"owned"
            base, end = owned.data_ptr(), owned.data_ptr() + owned.numel()
            for l in range(4):
                kb = torch.from_dlpack(cb.k(l))
                assert base <= kb.data_ptr() < end, "the view is not over the engine's tensor"
                assert bool((kb[6] == 5 + l).all()) and bool((kb[5] == 0).all())
            # The values are in the engine's own tensor: 4 layers x (K + V) of one block, none zero.
            written = int((owned.view(torch.float32) != 0).sum())
            assert written == per_block // 4, (written, per_block // 4)
        finally:
            a.close()
            cb.close()  # closes b first
            ca.close()
        raises(kvrt.StateError, b.progress)
        owned.fill_(1)  # still the engine's memory, usable after kvrt let go
        assert int(owned.sum()) == owned.numel()


def _key_file(folder, name, mode=0o600):
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, os.urandom(32))
    os.close(fd)
    os.chmod(path, mode)
    return path


def _connect_refused(a, b, accept_timeout=10):
    """a connects to b's listener; both sides' errors (accept in a thread).
    A listener that rejects the connection request itself never sees a
    peer: its accept waits out accept_timeout."""
    port = b.listen("127.0.0.1", 0)
    got = {}

    def accept():
        try:
            got["peer"] = b.accept(timeout=accept_timeout)
        except kvrt.Error as e:
            got["error"] = e
    t = threading.Thread(target=accept)
    t.start()
    try:
        a.connect("127.0.0.1", port)
        err = None
    except kvrt.Error as e:
        err = e
    t.join()
    return err, got.get("error"), got.get("peer")


def _samples(text):
    """Every sample of a Prometheus text, read by prometheus_client's own parser: {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_failure_and_refusal_reasons():
    """stats and metrics count failed transfers and refusals by reason: a push outside the grants fails as
    refused on both sides and is refused as not granted there, a wrong key is refused as auth; the reasons
    add up and prometheus_client reads them"""
    _need()
    import tempfile
    with tempfile.TemporaryDirectory() as d, kvrt.Runtime() as rt:
        p = Pair(rt, la="BLHNC", lb="BLHNC", b_options=dict(require_grants=True))
        try:
            e = raises(kvrt.RefusedError, p.a.transfer, p.peer, [3], [6], layers=(0, 1))
            assert "block 6 is not granted" in str(e), e
            deadline = time.time() + 10
            while p.b.stats["failed"] == 0 and time.time() < deadline:
                time.sleep(0.01)
            for side, st in (("sender", p.a.stats), ("receiver", p.b.stats)):
                reasons = {k: v for k, v in st.items() if k.startswith("failed_")}
                assert st["failed"] == 1 and reasons["failed_refused"] == 1 and sum(reasons.values()) == 1, \
                    (side, st)
            assert p.b.stats["denied"] == 1 and p.b.stats["violations"] == 0, p.b.stats
            got = _samples(p.b.metrics())
            assert got[("kvrt_xfer_failures_total", (("reason", "refused"),))] == 1, got
            assert got[("kvrt_xfer_refusals_total", (("reason", "not_granted"),))] == 1, got
            failures = {k[1][0][1]: v for k, v in got.items() if k[0] == "kvrt_xfer_failures_total"}
            assert set(failures) == {"timeout", "peer_closed", "connection", "violation", "refused", "released",
                                     "other"}, failures
            assert sum(failures.values()) == got[("kvrt_xfer_transfers_total", (("result", "failed"),))], got
            # The same peer, granted, moves; nothing more fails.
            p.b_peer.expect([6])
            p.a.transfer(p.peer, [3], [6], layers=(0, 1))
            assert p.a.stats["failed"] == 1 and p.a.stats["completed"] == 1, p.a.stats
        finally:
            p.close()
        key, other = _key_file(d, "key"), _key_file(d, "other")
        c1 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        c2 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        with kx.Agent(c1, key_file=other, timeout=10) as a, kx.Agent(c2, key_file=key, timeout=10) as b:
            _connect_refused(a, b)
            st = b.stats
            assert st["refused"] == 1 and st["refused_auth"] == 1, st
            got = _samples(b.metrics())
            assert got[("kvrt_xfer_connection_refusals_total", (("reason", "auth"),))] == 1, got
            assert got[("kvrt_xfer_refusals_total", (("reason", "connection"),))] == 1, got
            conns = {k[1][0][1]: v for k, v in got.items() if k[0] == "kvrt_xfer_connection_refusals_total"}
            assert set(conns) == {"auth", "allow_list", "busy", "metadata", "malformed", "other"}, conns
            assert sum(conns.values()) == st["refused"], got


def test_addresses_of_either_family():
    """listen and connect take IPv4 and IPv6 literals and host names: a host name and an IPv4-mapped IPv6 address
    connect; an IPv6 address on an agent whose UCX tcp interfaces are IPv4 (loopback in UCX 1.13) is refused
    naming the bound, never handed to UCX; malformed addresses and allow entries are refused naming the value;
    an IPv6 allow list keeps an IPv4 client out"""
    _need()
    with kvrt.Runtime() as rt:
        c1 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        c2 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        with kx.Agent(c1, timeout=10) as a, kx.Agent(c2, timeout=10) as b:
            for text in ("::1", "[::1]"):
                e = raises(kvrt.UnsupportedError, b.listen, text, 0)
                assert "IPv6" in str(e) and "UCX_TCP_AF_PRIO=inet6" in str(e), e
                e = raises(kvrt.UnsupportedError, a.connect, text, 9)
                assert "::1" in str(e), e
            for text in ("[::1", "::1]", "[]", "", "1.2.3.4.5", "[127.0.0.1]x", "host name.invalid"):
                e = raises(kvrt.InvalidArgumentError, b.listen, text, 0)
                assert text in str(e) or not text, e
            port = b.listen("localhost", 0)
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("peer", b.accept(timeout=10)))
            t.start()
            peer = a.connect("::ffff:127.0.0.1", port)
            t.join()
            assert peer is not None and got.get("peer") is not None, got
            assert peer.name == "127.0.0.1:%d" % port, peer.name
        e = raises(kvrt.InvalidArgumentError, kx.Agent, c1, allow=["fd00::/129"])
        assert "fd00::/129" in str(e) and "0..128" in str(e), e
        e = raises(kvrt.InvalidArgumentError, kx.Agent, c1, allow=["fd00::zz"])
        assert "fd00::zz" in str(e), e
        with kx.Agent(c1, timeout=10) as a, kx.Agent(c2, allow="fd00::/64,fe80::1", timeout=10) as b:
            err, _, peer = _connect_refused(a, b)
            assert peer is None and err is not None, (err, peer)
            assert b.stats["refused_allow"] == 1, b.stats
        with kx.Agent(c1, timeout=10) as a, kx.Agent(c2, allow="::ffff:127.0.0.0/104", timeout=10) as b:
            # an IPv4-mapped network holds IPv4 clients
            port = b.listen("127.0.0.1", 0)
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("peer", b.accept(timeout=10)))
            t.start()
            peer = a.connect("127.0.0.1", port)
            t.join()
            assert got.get("peer") is not None and b.stats["refused"] == 0, b.stats


def test_keys_allow_and_grants():
    """Agent(key_file=, insecure=, allow=, require_grants=) and the grants: peers with the key connect and move
    only granted blocks; a wrong key, a readable key file, an address outside the allow list and a
    non-loopback listener without a key are refused by name"""
    _need()
    import tempfile
    with tempfile.TemporaryDirectory() as d, kvrt.Runtime() as rt:
        key, other = _key_file(d, "key"), _key_file(d, "other")
        loose = _key_file(d, "loose", 0o644)
        opts = dict(key_file=key)
        p = Pair(rt, la="BLHNC", lb="BLHNC", a_options=opts, b_options=dict(key_file=key, require_grants=True))
        try:
            _fill(p.ca, 0, 3, 7)
            e = raises(kvrt.RefusedError, p.a.transfer, p.peer, [3], [6], layers=(0, 1))
            assert "block 6 is not granted" in str(e), e
            assert p.b.stats["denied"] == 1, p.b.stats
            # The serving thread's progress() raises the refusal once its
            # round ends, which may be after the sender heard of it.
            deadline = time.time() + 10
            while not any("block 6 is not granted" in str(x) for x in p.served_errors) and time.time() < deadline:
                time.sleep(0.01)
            assert any("block 6 is not granted" in str(x) for x in p.served_errors), p.served_errors
            p.b_peer.expect([6])
            p.a.transfer(p.peer, [3], [6], layers=(0, 1))
            assert float(torch.from_dlpack(p.cb.k(0))[6][0, 0, 0]) == 7.0
            e = raises(kvrt.RefusedError, p.a.transfer, p.peer, [1], [6], pull=True, layers=(0, 1))
            assert "reading" in str(e), e
            p.b_peer.grant([6], write=False)
            p.a.transfer(p.peer, [1], [6], pull=True, layers=(0, 1))
            assert float(torch.from_dlpack(p.ca.k(0))[1][0, 0, 0]) == 7.0
            p.b.grant([2, 4])  # every peer's, read and write
            p.a.transfer(p.peer, [3], [4], layers=(0, 1))
            p.b.revoke()
            p.b_peer.revoke()
            raises(kvrt.RefusedError, p.a.transfer, p.peer, [3], [4], layers=(0, 1))
            raises(kvrt.RefusedError, p.a.transfer, p.peer, [3], [6], layers=(0, 1))
            e = raises(kvrt.InvalidArgumentError, p.b_peer.grant, [99])
            assert "99" in str(e), e
            raises(kvrt.InvalidArgumentError, p.b.grant, [1], read=False, write=False)
        finally:
            p.close()
        c1 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        c2 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
        # The listener first: closing last, it need not wait out its
        # refusal's linger for a connecting side that is still open.
        with kx.Agent(c2, key_file=key, timeout=10) as b, kx.Agent(c1, key_file=other, timeout=10) as a:
            err, server_err, peer = _connect_refused(a, b)
            assert isinstance(err, kvrt.RefusedError) and peer is None, (err, server_err, peer)
        with kx.Agent(c2, key_file=key, timeout=10) as b, kx.Agent(c1, timeout=10) as a:
            err, _, peer = _connect_refused(a, b)
            assert isinstance(err, kvrt.RefusedError) and "key" in str(err) and peer is None, err
        with kx.Agent(c1, timeout=10) as a, kx.Agent(c2, allow=["10.9.8.7", "10.1.0.0/16"], timeout=10) as b:
            err, _, peer = _connect_refused(a, b, accept_timeout=1)
            # refused when the connection request arrives, before a handshake
            assert isinstance(err, kvrt.DeviceError) and "rejected" in str(err) and peer is None, err
        e = raises(kvrt.Error, kx.Agent, c1, key_file=loose)
        assert loose in str(e) and "0644" in str(e), e
        e = raises(kvrt.InvalidArgumentError, kx.Agent, c1, allow=["no-such-host"])
        assert "no-such-host" in str(e), e
        with kx.Agent(c1) as a:
            e = raises(kvrt.RefusedError, a.listen, "0.0.0.0", 0)
            assert "without a key" in str(e) and "KVRT_XFER_KEY_FILE" in str(e), e
        with kx.Agent(c1, insecure=True) as a:
            assert a.listen("0.0.0.0", 0) > 0
        with kx.Agent(c1, key_file=key) as a:
            assert a.listen("0.0.0.0", 0) > 0
