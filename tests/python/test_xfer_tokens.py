"""kvrt.xfer token ranges: two block tables, any two block sizes, any token
range, layouts and tensor-parallel head slices, checked against a reference
written in plain torch on the caches' logical [blocks, heads, states,
content] views (token t of a table of bs-token blocks is block
table[t // bs], state t % bs)."""
import random
import threading
import time

import torch

import kvrt
from common import LAYOUTS, model, raises

# kvrt.xfer (None where libkvrt-xfer is not built) and the skip that says why
from test_xfer import _need, kx

LAYERS, HEAD = 3, 8


class Fleet:
    """Agent `me` (the initiator) connected to one agent per other cache; a
    thread progresses the others, as their engines would."""

    def __init__(self, my_cache, other_caches):
        self.me = kx.Agent(my_cache, timeout=20)
        self.others = [kx.Agent(c, timeout=20) for c in other_caches]
        self.peers = []
        for o in self.others:
            port = o.listen("127.0.0.1", 0)
            got = {}
            t = threading.Thread(target=lambda o=o: got.setdefault("p", o.accept(timeout=20)))
            t.start()
            self.peers.append(self.me.connect("127.0.0.1", port))
            t.join()
            assert got.get("p") is not None, "accept saw no peer"
        self._stop = False
        self._t = threading.Thread(target=self._serve)
        self._t.start()

    def _serve(self):
        while not self._stop:
            for o in self.others:
                o.progress()
            time.sleep(0.0002)

    def close(self):
        self._stop = True
        self._t.join()
        self.me.close()
        for o in self.others:
            o.close()


def _cache(rt, heads, bs, layout, blocks, dtype="bf16"):
    return rt.cache(model=model(layers=LAYERS, kv_heads=heads, head_size=HEAD, dtype=dtype, block_size=bs),
                    layout=layout, blocks=blocks, backend="cpu")


def _views(cache):
    return [torch.from_dlpack(cache.layer(l)) for l in range(LAYERS)]


def _randomize(cache, g):
    for v in _views(cache):
        v.copy_(torch.randn(v.shape, generator=g).to(v.dtype))


def _table(rng, tokens, bs, blocks):
    """A sequence's block table: distinct random ids, enough for `tokens`."""
    return rng.sample(range(blocks), (tokens + bs - 1) // bs)


def _expect(dst_views, src_views, dst_table, dst_bs, src_table, src_bs, first, count, dst_h0, src_h0, nh):
    """The reference: every token of the range, copied cell by cell."""
    want = [v.clone() for v in dst_views]
    for l in range(LAYERS):
        for t in range(first, first + count):
            want[l][dst_table[t // dst_bs], dst_h0:dst_h0 + nh, t % dst_bs] = \
                src_views[l][src_table[t // src_bs], src_h0:src_h0 + nh, t % src_bs]
    return want


def _same(got, want, what):
    for l, (g, w) in enumerate(zip(got, want)):
        if not torch.equal(g, w):
            bad = (g != w).nonzero()
            raise AssertionError("%s: layer %d differs at %d cells, first [block, head, state, c] %s"
                                 % (what, l, bad.shape[0], bad[0].tolist()))


def test_token_ranges_random():
    """random block-size pairs (dividing or not), token ranges, layouts, push and pull, equal the torch reference"""
    _need()
    rng = random.Random(20261204)
    g = torch.Generator().manual_seed(7)
    pairs = [(16, 64), (64, 16), (16, 24), (5, 7), (32, 32), (1, 3)] + [
        (rng.choice([1, 2, 3, 4, 8, 16, 24, 32, 48, 64]), rng.choice([1, 2, 3, 4, 8, 16, 24, 32, 48, 64]))
        for _ in range(4)]
    with kvrt.Runtime() as rt:
        for i, (sbs, dbs) in enumerate(pairs):
            heads = rng.choice([1, 2, 4])
            slay, dlay = rng.choice(LAYOUTS), rng.choice(LAYOUTS)
            seq = rng.randint(1, 200)
            first = rng.randint(0, seq - 1)
            count = rng.randint(1, seq - first)
            src = _cache(rt, heads, sbs, slay, (seq + sbs - 1) // sbs + rng.randint(0, 6))
            dst = _cache(rt, heads, dbs, dlay, (seq + dbs - 1) // dbs + rng.randint(0, 6))
            _randomize(src, g)
            _randomize(dst, g)
            stab = _table(rng, seq, sbs, src.num_blocks)
            dtab = _table(rng, seq, dbs, dst.num_blocks)
            want = _expect(_views(dst), _views(src), dtab, dbs, stab, sbs, first, count, 0, 0, heads)
            pull = i % 2 == 1
            what = "%s %d -> %s %d, %d heads, tokens %d+%d of %d, %s" % (
                slay, sbs, dlay, dbs, heads, first, count, seq, "pull" if pull else "push")
#A pull is posted by the destination, a push by the source.
            f = Fleet(dst, [src]) if pull else Fleet(src, [dst])
            try:
                if pull:
                    plan = f.me.transfer(f.peers[0], dtab, stab, pull=True, tokens=(first, count))
                else:
                    plan = f.me.transfer(f.peers[0], stab, dtab, tokens=range(first, first + count))
                assert plan["method"] == "direct", (what, plan)
                assert plan["bytes"] == count * LAYERS * heads * 2 * HEAD * 2, (what, plan)
            finally:
                f.close()
            _same(_views(dst), want, what)
            src.close()
            dst.close()


def test_token_ranges_tensor_parallel():
    """each decode rank pulls its heads from the prefill ranks tp_map names (replicated heads too), token-exact"""
    _need()
    rng = random.Random(4)
    g = torch.Generator().manual_seed(11)
    cases = [(4, 2, 1), (4, 1, 2), (2, 1, 4), (8, 4, 2), (2, 4, 1), (4, 2, 4)]  # (kv_heads, prefill tp, decode tp)
    with kvrt.Runtime() as rt:
        for kv_heads, ptp, dtp in cases:
            sbs, dbs = rng.choice([16, 8, 5]), rng.choice([64, 16, 12])
            seq = rng.randint(20, 150)
            first, count = rng.randint(0, 10), 0
            count = rng.randint(1, seq - first)
#Reference : the whole model's heads, one tensor per layer.
            full = [torch.randn(seq, kv_heads, 2 * HEAD, generator=g).to(torch.bfloat16) for _ in range(LAYERS)]
            prefill = []
            for r in range(ptp):
                h = kvrt.tp_heads(kv_heads, ptp, r)
                c = _cache(rt, h["num_heads"], sbs, rng.choice(LAYOUTS), (seq + sbs - 1) // sbs + 3)
                tab = _table(rng, seq, sbs, c.num_blocks)
                for l, v in enumerate(_views(c)):
                    v.zero_()
                    for t in range(seq):
                        v[tab[t // sbs], :, t % sbs] = full[l][t, h["head_start"]:h["head_start"] + h["num_heads"]]
                prefill.append((c, tab))
            for d in range(dtp):
                h = kvrt.tp_heads(kv_heads, dtp, d)
                dst = _cache(rt, h["num_heads"], dbs, rng.choice(LAYOUTS), (seq + dbs - 1) // dbs + 2)
                dtab = _table(rng, seq, dbs, dst.num_blocks)
                _randomize(dst, g)
                before = [v.clone() for v in _views(dst)]
                runs = kx.tp_map(kv_heads, dtp, d, ptp, spread=7)
                covered = sum(n for _, _, _, n in runs)
                assert covered == h["num_heads"], (kv_heads, ptp, dtp, d, runs)
                f = Fleet(dst, [c for c, _ in prefill])
                try:
                    reqs = [f.me.post(f.peers[pr], dtab, prefill[pr][1], pull=True, heads=(lh, rh, n),
                                       tokens=(first, count)) for pr, lh, rh, n in runs]
                    for q in reqs:
                        assert q.wait(20)
                        q.release()
                finally:
                    f.close()
                what = "kv_heads %d, prefill tp %d -> decode tp %d rank %d" % (kv_heads, ptp, dtp, d)
                got = _views(dst)
                for l in range(LAYERS):
                    want = before[l].clone()
                    for t in range(first, first + count):
                        want[dtab[t // dbs], :, t % dbs] = full[l][t, h["head_start"]:h["head_start"] + h["num_heads"]]
                    assert torch.equal(got[l], want), "%s: layer %d" % (what, l)
                dst.close()
            for c, _ in prefill:
                c.close()


def test_token_range_refusals():
    """short tables, repeated or negative ids, bad ranges and whole blocks between block sizes are refused by name"""
    _need()
    with kvrt.Runtime() as rt:
        src = _cache(rt, 2, 16, "LBHNC", 8)
        dst = _cache(rt, 2, 64, "LBNHC", 4)
        f = Fleet(dst, [src])
        try:
            peer = f.peers[0]
            e = raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0, 1], list(range(8)), pull=True,
                       tokens=(100, 60))
            assert "need 3 entries of the local block table (64-token blocks); local_ids has 2" in str(e), e
            e = raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0, 1], [0, 1, 2], pull=True, tokens=(0, 64))
            assert "need 4 entries of the remote block table (16-token blocks); remote_ids has 3" in str(e), e
            e = raises(kvrt.InvalidArgumentError, f.me.plan, peer, [1, 1], list(range(8)), pull=True,
                       tokens=(0, 100))
            assert "destination block id 1 appears twice in local_ids (at 1" in str(e), e
            e = raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0, 1], [0, -3, 2, 3, 4, 5, 6, 7], pull=True,
                       tokens=(0, 100))
            assert "remote block id -3 at remote_ids[1] is out of range" in str(e), e
            e = raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0], [0], pull=True)
            assert "64-token blocks here and 16-token blocks on the peer" in str(e), e
            raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0], [0], pull=True, tokens=(-1, 4))
            raises(kvrt.InvalidArgumentError, f.me.plan, peer, [0], [0], pull=True, tokens=(0, 0))
            e = raises(kvrt.Error, f.me.plan, peer, [0, 1], list(range(8)), pull=True, tokens=(0, 100),
                       method="regions")
            assert "token range moves by method direct" in str(e), e
#the same range, well formed, plans
            p = f.me.plan(peer, [0, 1], list(range(8)), pull=True, tokens=(3, 97))
            assert p["method"] == "direct" and p["bytes"] == 97 * LAYERS * 2 * 2 * HEAD * 2, p
        finally:
            f.close()


def _hybrid(rt, bs, state_tokens, blocks):
    """Two attention layers of bs-token blocks and one state layer (a Mamba
    state of 600 bytes per state_tokens tokens), as a hybrid model places
    them."""
    att = [{"name": "attn.%d" % i, "kind": "attention", "kv_heads": 2, "head_size": HEAD, "dtype": "bf16",
            "block_size": bs} for i in range(2)]
    st = [{"name": "mamba.0", "kind": "state", "state_content_bytes": 600, "block_size": state_tokens}]
    return rt.cache(model={"groups": [{"layers": att}, {"layers": st}]}, layout="BLHNC", blocks=blocks,
                    backend="cpu")


def test_state_groups_by_block_id():
    """hybrid caches of 16- and 64-token attention blocks: attention by token range, states whole by block id"""
    _need()
    g = torch.Generator().manual_seed(3)
    with kvrt.Runtime() as rt:
        src, dst = _hybrid(rt, 16, 1888, 8), _hybrid(rt, 64, 1888, 4)
        odd = _hybrid(rt, 64, 1024, 4)
        for c in (src, dst, odd):
            for l in range(3):
                v = torch.from_dlpack(c.layer(l))
                v.copy_(torch.randint(0, 255, v.shape, generator=g, dtype=torch.uint8).view(v.dtype)
                        if v.dtype == torch.uint8 else torch.randn(v.shape, generator=g).to(v.dtype))
        f = Fleet(src, [dst, odd])
        try:
            stab, dtab = [5, 2, 7, 0, 3], [3, 1]
            # A token range over every layer names the state layer.
            e = raises(kvrt.InvalidArgumentError, f.me.plan, f.peers[0], stab, dtab, tokens=(0, 70))
            assert "layer 2 here is a state layer" in str(e) and "by block id" in str(e), e
            # The attention layers move by token range...
            sv = [torch.from_dlpack(src.layer(l)) for l in range(3)]
            dv = [torch.from_dlpack(dst.layer(l)) for l in range(3)]
            want = [v.clone() for v in dv]
            for l in range(2):
                for t in range(5, 70):
                    want[l][dtab[t // 64], :, t % 64] = sv[l][stab[t // 16], :, t % 16]
            f.me.transfer(f.peers[0], stab, dtab, tokens=(5, 65), layers=(0, 2))
            # ...and the state layer whole, by block id, between the two
            # block sizes: both hold one state per 1888 tokens.
            f.me.transfer(f.peers[0], [7], [2], layers=(2, 1))
            want[2][2] = sv[2][7]
            # Groups overlay: block 2 now belongs to the state group, whose
            # page holds its attention layers' bytes too.
            for l in range(2):
                for b in (0, 1, 3):
                    # bitwise: the state's random bytes overlay these pages
                    assert torch.equal(dv[l][b].view(torch.int16), want[l][b].view(torch.int16)), \
                        "layer %d block %d" % (l, b)
            assert torch.equal(dv[2][2], want[2][2]), "the state"
            # States of another tokens per state are refused by name.
            e = raises(kvrt.InvalidArgumentError, f.me.plan, f.peers[1], [7], [2], layers=(2, 1))
            assert "state layer of one state per 1888 tokens here and per 1024 on the peer" in str(e), e
            # Whole attention blocks between the two block sizes too.
            e = raises(kvrt.InvalidArgumentError, f.me.plan, f.peers[0], [1], [1], layers=(0, 2))
            assert "16-token blocks here and 64-token blocks on the peer" in str(e), e
        finally:
            f.close()


def test_token_ranges_every_layout_pair():
    """all 36 layout pairs, block sizes 16 -> 64, 64 -> 16 and 5 -> 7 in turn, push and pull: token-exact"""
    _need()
    rng = random.Random(36)
    g = torch.Generator().manual_seed(36)
    sizes = [(16, 64), (64, 16), (5, 7)]
    with kvrt.Runtime() as rt:
        for i, (slay, dlay) in enumerate((a, b) for a in LAYOUTS for b in LAYOUTS):
            sbs, dbs = sizes[i % len(sizes)]
            seq = 150
            first = rng.randint(0, 40)
            count = rng.randint(1, seq - first)
            src = _cache(rt, 2, sbs, slay, (seq + sbs - 1) // sbs + 2)
            dst = _cache(rt, 2, dbs, dlay, (seq + dbs - 1) // dbs + 2)
            _randomize(src, g)
            _randomize(dst, g)
            stab, dtab = _table(rng, seq, sbs, src.num_blocks), _table(rng, seq, dbs, dst.num_blocks)
            want = _expect(_views(dst), _views(src), dtab, dbs, stab, sbs, first, count, 0, 0, 2)
            pull = i % 2 == 1
            f = Fleet(dst, [src]) if pull else Fleet(src, [dst])
            try:
                if pull:
                    f.me.transfer(f.peers[0], dtab, stab, pull=True, tokens=(first, count))
                else:
                    f.me.transfer(f.peers[0], stab, dtab, tokens=(first, count))
            finally:
                f.close()
            _same(_views(dst), want, "%s %d -> %s %d, tokens %d+%d, %s" % (
                slay, sbs, dlay, dbs, first, count, "pull" if pull else "push"))
            src.close()
            dst.close()
