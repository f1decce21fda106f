"""Index lists: every public call that takes block ids, block tables, slots,
pairs, sequence lengths or token ids refuses a value its C type cannot hold
(ctypes would wrap 2**64 + 1 into 1, another block), naming the argument,
the position, the value and the valid range; and takes any integer tensor
whose values fit."""
import threading

import numpy
import torch

import kvrt
from common import Skip, model, raises

I32 = "from -2147483648 to 2147483647 (int32)"
I64 = "from -9223372036854775808 to 9223372036854775807 (int64)"
HUGE = 2 ** 64 + 1          # wraps to 1 in a ctypes int64
WIDE = 2 ** 32 + 1          # wraps to 1 in a ctypes int32


def refused(said, fn, *args, **kw):
    """fn(*args, **kw) raises InvalidArgumentError whose message holds every
    piece of `said`."""
    e = raises(kvrt.InvalidArgumentError, fn, *args, **kw)
    for piece in said:
        assert piece in str(e), "%r not in %r" % (piece, str(e))
    return e


def _cache(rt, dtype="fp32", blocks=8):
    return rt.cache(model=model(dtype=dtype), layout="HND", blocks=blocks, backend="cpu")


def test_cache_calls_refuse_wrapping_ids():
    """write, read, copy_blocks, gather, scatter, decode, staging_bytes refuse values out of their C range"""
    with kvrt.Runtime() as rt, _cache(rt) as c:
        k = torch.zeros((1, 2, 8))
        refused(["slots[0] is %d" % HUGE, I64], c.write, 0, [HUGE], k, k)
        refused(["slots[1] is %d" % -HUGE, I64], c.read, 0, [0, -HUGE])
        refused(["pairs[0] is %d" % HUGE, I64], c.copy_blocks, [HUGE, 2])
        refused(["pairs[3] is %d" % HUGE, I64], c.copy_blocks, [(0, 1), (2, HUGE)])
        refused(["block_ids[2] is %d" % HUGE, I64], c.gather, [0, 1, HUGE])
        staging = c.gather([1])
        refused(["block_ids[0] is %d" % HUGE, I64], c.scatter, [HUGE], staging)
        q = torch.zeros((1, 4, 8))
        refused(["block_tables[0] is %d" % WIDE, I32], c.decode, 0, q, [WIDE], [4])
        refused(["seq_lens[0] is %d" % WIDE, I32], c.decode, 0, q, [0], [WIDE])
        refused(["num_blocks", str(-1)], c.staging_bytes, -1)
        refused(["num_blocks", str(HUGE)], c.staging_bytes, HUGE)


def test_tensors_checked_by_value():
    """numpy and torch tensors of any integer type: values checked one by one, positions as [i] or [i, j]"""
    with kvrt.Runtime() as rt, _cache(rt) as c:
        refused(["pairs[0] is 18446744073709551615", I64], c.copy_blocks,
                numpy.array([2 ** 64 - 1, 2], dtype=numpy.uint64))
        q = torch.zeros((2, 4, 8))
        refused(["block_tables[1, 0] is %d" % WIDE, I32], c.decode, 0, q,
                numpy.array([[0, 1], [WIDE, 0]], dtype=numpy.int64), numpy.array([1, 1], dtype=numpy.int32))
        refused(["seq_lens[1] is %d" % (2 ** 31), I32], c.decode, 0, q, torch.zeros((2, 1), dtype=torch.int64),
                torch.tensor([1, 2 ** 31], dtype=torch.int64))
        # in range: any integer type, any stride, gives what int64/int32 give
        torch.from_dlpack(c.k(0)).copy_(torch.randn(torch.from_dlpack(c.k(0)).shape))
        torch.from_dlpack(c.v(0)).copy_(torch.randn(torch.from_dlpack(c.v(0)).shape))
        want = c.gather([3, 5])
        for ids in (numpy.array([3, 5], dtype=numpy.uint8), torch.tensor([3, 5], dtype=torch.int16),
                    torch.tensor([3, 4, 5])[::2], numpy.array([[3, 9], [5, 9]])[:, 0], (3, 5), range(3, 6, 2)):
            assert torch.equal(c.gather(ids), want), ids
        tables = [[4, 1], [2, 5]]
        lens = [5, 7]
        q = torch.randn((2, 4, 8))
        want = c.decode(0, q, torch.tensor(tables, dtype=torch.int32), torch.tensor(lens, dtype=torch.int32))
        got = c.decode(0, q, numpy.array(tables, dtype=numpy.int64), [numpy.int64(5), 7])
        assert torch.equal(want, got)


def test_non_integers_refused():
    """floats, bools, strings and float or bool tensors are refused naming the value"""
    with kvrt.Runtime() as rt, _cache(rt) as c:
        refused(["block_ids[1] is 1.5, a float", I64], c.gather, [0, 1.5])
        refused(["block_ids[0] is True, a bool", I64], c.gather, [True])
        refused(["block_ids[0] is True, a bool"], c.gather, [numpy.bool_(True)])
        refused(["pairs[1] is '2', a str"], c.copy_blocks, [1, "2"])
        refused(["block_ids: element type float32", I64], c.gather, torch.tensor([1.0]))
        refused(["block_ids: a tensor of bools"], c.gather, torch.tensor([True]))
        refused(["block_ids: 3 is no list of indices"], c.gather, 3)
        refused(["slots: None is no list of indices"], c.read, 0, None)


def test_store_calls_refuse_wrapping_ids():
    """Store put, get, put_async, get_async, lookup and keys refuse block tables and tokens out of range"""
    try:
        from kvrt.store import Store
    except ImportError as e:
        raise Skip(str(e).replace("\n", " "))
    m = model(dtype="fp32", block_size=4)
    with kvrt.Runtime() as rt, _cache(rt) as c, Store(None, model=m, model_id="idx@1", chunk_tokens=4) as s:
        tok = list(range(8))
        for call in (s.put, s.get, s.put_async, s.get_async):
            refused(["block_table[1] is %d" % HUGE, I64], call, c, [0, HUGE], tok)
            refused(["tokens[7] is %d" % WIDE, I32], call, c, [0, 1], tok[:7] + [WIDE])
            refused(["tokens[0, 2] is %d" % WIDE, I32], call, c, [0, 1],
                    torch.tensor([[0, 1, WIDE, 3], [4, 5, 6, 7]]))
        refused(["tokens[0] is %d" % -WIDE, I32], s.lookup, [-WIDE])
        refused(["tokens[1] is %d" % WIDE, I32], s.keys, numpy.array([0, WIDE]))
        assert s.put(c, numpy.array([0, 1], dtype=numpy.uint8), torch.tensor(tok, dtype=torch.int64)) == 8
        assert s.lookup(numpy.array(tok, dtype=numpy.int16)) == 8


class _Agents:
    """Two kvrt.xfer agents, `a` connected to `b` (nothing progresses them:
    every call here is refused before anything moves)."""

    def __init__(self, rt, kx):
        self.ca, self.cb = _cache(rt), _cache(rt)
        self.a, self.b = kx.Agent(self.ca, timeout=20), kx.Agent(self.cb, timeout=20)
        port = self.b.listen("127.0.0.1", 0)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("peer", self.b.accept(timeout=20)))
        t.start()
        self.peer = self.a.connect("127.0.0.1", port)
        t.join()
        self.b_peer = got["peer"]
        assert self.b_peer is not None, "accept saw no peer"

    def close(self):
        self.a.close()
        self.b.close()
        self.ca.close()
        self.cb.close()


def test_xfer_calls_refuse_wrapping_ids():
    """Agent post, plan, transfer, grant, revoke; Peer grant, expect, revoke; layers, heads, tokens, ports"""
    try:
        import kvrt.xfer as kx
    except ImportError as e:
        raise Skip(str(e).replace("\n", " "))
    import os
    os.environ.setdefault("UCX_TLS", "tcp")
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    with kvrt.Runtime() as rt:
        p = _Agents(rt, kx)
        try:
            a, peer = p.a, p.peer
            for call in (a.post, a.plan, a.transfer):
                refused(["local_ids[0] is %d" % HUGE, I64], call, peer, [HUGE], [1])
                refused(["remote_ids[1] is %d" % HUGE, I64], call, peer, [0, 1], [2, HUGE])
                refused(["remote_ids[0] is 18446744073709551615", I64], call, peer, [0],
                        numpy.array([2 ** 64 - 1], dtype=numpy.uint64))
            refused(["layers start %d" % HUGE], a.plan, peer, [0], [1], layers=(HUGE, 1))
            refused(["layers start -1"], a.plan, peer, [0], [1], layers=(-1, 2))
            refused(["heads local_start %d" % HUGE], a.plan, peer, [0], [1], heads=(HUGE, 0, 1))
            refused(["heads count -1"], a.plan, peer, [0], [1], heads=(0, 0, -1))
            refused(["tokens first %d" % HUGE], a.plan, peer, [0], [1], tokens=(HUGE, 4))
            for call in (a.grant, a.revoke, p.b_peer.grant, p.b_peer.expect, p.b_peer.revoke):
                refused(["ids[1] is %d" % HUGE, I64], call, [0, HUGE])
            refused(["port 65537"], p.b.listen, "127.0.0.1", 65537)
            refused(["port 65537"], a.connect, "127.0.0.1", 65537)
            assert a.stats["handles"] == 0
            assert a.plan(peer, numpy.array([0], dtype=numpy.int32), torch.tensor([1], dtype=torch.uint8))["bytes"] > 0
        finally:
            p.close()
