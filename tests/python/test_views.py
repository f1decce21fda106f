"""DLPack views of caches: torch and numpy see what kvrt writes, kvrt sees
what they write, and the views are the layout's (kvrt plan --json)."""
import math

import numpy
import torch

import kvrt
from common import LAYOUTS, TORCH, cli, model

L, B, BS, H, D = 4, 6, 4, 2, 8


def _tokens(dtype, n, heads, size, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, heads, size), generator=g).to(TORCH[dtype])


def _slots(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(B * BS, generator=g)[:n].to(torch.int64)


def test_layer_views_all_layouts():
    """six layouts x bf16/fp32: layer l != 0 views hold kvrt's writes, writes through them reach kvrt
    read, shape/stride equal kvrt plan --json"""
    with kvrt.Runtime() as rt:
        for layout in LAYOUTS:
            for dtype in ("bf16", "fp32"):
                what = "%s %s" % (layout, dtype)
                plan = cli("plan", "--json", "--layout", layout, "--layers", str(L), "--blocks", str(B),
                           "--block-size", str(BS), "--kv-heads", str(H), "--head-size", str(D), "--dtype", dtype)
                with rt.cache(model=model(L, H, D, dtype, BS), layout=layout, blocks=B, backend="cpu") as c:
                    for layer in (1, 2, 3):
                        slots = _slots(9, layer)
                        k, v = _tokens(dtype, 9, H, D, layer), _tokens(dtype, 9, H, D, 100 + layer)
                        c.write(layer, slots, k, v)
                        t = torch.from_dlpack(c.layer(layer))
                        want = plan["layers"][layer]
                        assert list(t.shape) == want["shape"], (what, t.shape, want["shape"])
                        assert list(t.stride()) == want["strides"], (what, t.stride(), want["strides"])
                        assert t.dtype == TORCH[dtype]
                        blk, off = slots // BS, slots % BS
                        assert torch.equal(t[blk, :, off, :D], k), what
                        assert torch.equal(t[blk, :, off, D:], v), what
                        # Through the view, back through kvrt.
                        t[blk, :, off, :D] = -k
                        t[blk, :, off, D:] = 2 * v
                        rk, rv = c.read(layer, slots)
                        assert torch.equal(rk, -k) and torch.equal(rv, 2 * v), what
                        # The layer's neighbours are untouched (no aliasing of layer 0).
                        assert not torch.equal(torch.from_dlpack(c.layer(0)), t), what


def test_numpy_views():
    """numpy.from_dlpack gives the same bytes as torch (fp32), zero copy"""
    with kvrt.Runtime() as rt, rt.cache(model=model(dtype="fp32"), layout="HND", blocks=B, backend="cpu") as c:
        slots = _slots(5, 7)
        k, v = _tokens("fp32", 5, H, D, 1), _tokens("fp32", 5, H, D, 2)
        c.write(2, slots, k.numpy(), v.numpy())
        a = numpy.from_dlpack(c.k(2))
        t = torch.from_dlpack(c.k(2))
        assert a.shape == tuple(t.shape) and a.strides == tuple(s * 4 for s in t.stride())
        assert numpy.array_equal(a, t.numpy())
        blk, off = (slots // BS).numpy(), (slots % BS).numpy()
        assert numpy.array_equal(a[blk, :, off, :], k.numpy())
        t[0, 0, 0, 0] = 42.0
        assert a[0, 0, 0, 0] == 42.0


def test_vllm_reshape_and_cache():
    """vLLM's reshape_and_cache indexing on the K/V views equals kvrt_cache_write byte for byte"""
    with kvrt.Runtime() as rt:
        for layout in LAYOUTS:
            for dtype in ("bf16", "fp32"):
                a = rt.cache(model=model(dtype=dtype), layout=layout, blocks=B, backend="cpu")
                b = rt.cache(model=model(dtype=dtype), layout=layout, blocks=B, backend="cpu")
                for layer in range(L):
                    slots = _slots(11, 50 + layer)
                    slots[3] = -1  # vLLM's padding token: skipped
                    k, v = _tokens(dtype, 11, H, D, layer), _tokens(dtype, 11, H, D, 200 + layer)
                    # vLLM: block_idx = slot // block_size, block_offset = slot % block_size,
                    # key_cache[block_idx, :, block_offset, :] = key[i] on the [B, H, N, D] view.
                    kc, vc = torch.from_dlpack(a.k(layer)), torch.from_dlpack(a.v(layer))
                    keep = slots >= 0
                    s = slots[keep]
                    kc[s // BS, :, s % BS, :] = k[keep]
                    vc[s // BS, :, s % BS, :] = v[keep]
                    b.write(layer, slots, k, v)
                ga, gb = a.gather(list(range(B))), b.gather(list(range(B)))
                assert ga.dtype == torch.uint8 and ga.numel() == a.staging_bytes(B)
                assert torch.equal(ga, gb), "%s %s" % (layout, dtype)
                a.close()
                b.close()


def _decode_ref(kc, vc, q, tables, lens, scale):
    out = torch.empty(q.shape, dtype=torch.float32)
    hq, h = q.shape[1], kc.shape[1]
    for s in range(q.shape[0]):
        toks = torch.arange(int(lens[s]))
        blocks = tables[s][toks // BS].long()
        keys = kc[blocks, :, toks % BS, :].float()   # [T, H, D]
        vals = vc[blocks, :, toks % BS, :].float()
        for qh in range(hq):
            kh = qh // (hq // h)
            w = torch.softmax((keys[:, kh, :] @ q[s, qh].float()) * scale, dim=0)
            out[s, qh] = w @ vals[:, kh, :]
    return out


def test_decode_sees_torch_writes():
    """K/V written through torch views are what kvrt decode attends to"""
    with kvrt.Runtime() as rt:
        for layout in ("LBNHC", "BHLNC"):
            for dtype in ("bf16", "fp32"):
                with rt.cache(model=model(dtype=dtype), layout=layout, blocks=B, backend="cpu") as c:
                    kc, vc = torch.from_dlpack(c.k(3)), torch.from_dlpack(c.v(3))
                    g = torch.Generator().manual_seed(3)
                    kc.copy_(torch.randn(kc.shape, generator=g).to(kc.dtype))
                    vc.copy_(torch.randn(vc.shape, generator=g).to(vc.dtype))
                    q = torch.randn((2, 4, D), generator=g).to(TORCH[dtype])
                    tables = torch.tensor([[4, 1, 0], [2, 5, 3]], dtype=torch.int32)
                    lens = torch.tensor([9, 12], dtype=torch.int32)
                    out = c.decode(3, q, tables, lens)
                    ref = _decode_ref(kc, vc, q, tables, lens, 1.0 / math.sqrt(D))
                    tol = 3e-2 if dtype == "bf16" else 1e-5
                    assert torch.allclose(out.float(), ref, atol=tol, rtol=tol), (layout, dtype,
                                                                                 (out.float() - ref).abs().max())


def test_whole_cache_view():
    """all_layers(): the 5-D [L, B, H, N, C] view whose layer l is layer(l)'s view"""
    with kvrt.Runtime() as rt:
        for layout in LAYOUTS:
            with rt.cache(model=model(), layout=layout, blocks=B, backend="cpu") as c:
                w = torch.from_dlpack(c.all_layers())
                plan = cli("plan", "--json", "--layout", layout, "--layers", str(L), "--blocks", str(B),
                           "--block-size", str(BS), "--kv-heads", str(H), "--head-size", str(D), "--dtype", "bf16")
                assert list(w.shape) == [L] + plan["layers"][0]["shape"]
                assert w.stride()[0] * 2 == plan["layer_stride"], layout
                for layer in range(L):
                    one = torch.from_dlpack(c.layer(layer))
                    one.fill_(layer + 1)
                    assert w[layer].data_ptr() == one.data_ptr() and w[layer].stride() == one.stride()
                assert all(bool((w[l] == l + 1).all()) for l in range(L)), layout
                kv = torch.from_dlpack(c.all_layers("k"))
                assert kv.shape[-1] == D and kv.data_ptr() == w.data_ptr()


def test_operations_copy_gather_scatter():
    """copy_blocks, gather and scatter take lists, numpy and torch index arrays"""
    with kvrt.Runtime() as rt, rt.cache(model=model(), layout="BLNHC", blocks=B, backend="cpu") as c:
        t = torch.from_dlpack(c.all_layers())
        t.copy_(torch.randn(t.shape).to(t.dtype))
        before = t.clone()
        c.copy_blocks([(0, 5), (1, 4)])
        assert torch.equal(t[:, 5], before[:, 0]) and torch.equal(t[:, 4], before[:, 1])
        staged = c.gather(numpy.array([2, 3], dtype=numpy.int64))
        c.scatter(torch.tensor([0, 1]), staged)
        assert torch.equal(t[:, 0], before[:, 2]) and torch.equal(t[:, 1], before[:, 3])
