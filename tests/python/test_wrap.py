"""Runtime.wrap: the engine's own tensor becomes the cache.  kvrt's writes
are in the engine's tensor and the engine's writes are what kvrt reads; a
view of a layer aliases the tensor at the layer's offset; a vLLM-style
strided view must be exactly the layout's; the producer's deleter runs once,
also when the wrap is refused."""
import os
import sys

import numpy
import torch

import kvrt
from common import LAYOUTS, TORCH, cli, model, raises

L, B, BS, H, D = 3, 5, 4, 2, 8


def _plan(layout, dtype="bf16", layers=L, blocks=B):
    return cli("plan", "--json", "--layout", layout, "--layers", str(layers), "--blocks", str(blocks),
               "--block-size", str(BS), "--kv-heads", str(H), "--head-size", str(D), "--dtype", dtype)


def _tokens(dtype, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, H, D), generator=g).to(TORCH[dtype])


def test_flat_tensor_aliases_every_layout():
    """six layouts: a flat int8 torch tensor becomes the cache; layer views alias it at the layer's offset;
    kvrt's writes land in it and the engine's writes are what kvrt reads"""
    with kvrt.Runtime() as rt:
        for layout in LAYOUTS:
            plan = _plan(layout)
            raw = torch.zeros(plan["total_bytes"], dtype=torch.int8)
            with rt.wrap(raw, model=model(L, H, D, "bf16", BS), layout=layout, backend="cpu") as c:
                assert c.num_blocks == B and c.layout == layout, (layout, c.num_blocks)
                for layer in range(L):
                    t = torch.from_dlpack(c.layer(layer))
                    want = plan["layers"][layer]
                    assert t.data_ptr() == raw.data_ptr() + want["offset_bytes"], layout
                    assert list(t.shape) == want["shape"] and list(t.stride()) == want["strides"], layout
                slots = torch.tensor([1, 6, 17], dtype=torch.int64)
                k, v = _tokens("bf16", 3, 1), _tokens("bf16", 3, 2)
                c.write(2, slots, k, v)
                # The engine's own view of layer 2, built from its raw tensor.
                want = plan["layers"][2]
                mine = raw.view(torch.bfloat16)[want["offset_bytes"] // 2:].as_strided(want["shape"],
                                                                                        want["strides"])
                blk, off = slots // BS, slots % BS
                assert torch.equal(mine[blk, :, off, :D], k) and torch.equal(mine[blk, :, off, D:], v), layout
                mine[blk, :, off, :D] = -k
                rk, rv = c.read(2, slots)
                assert torch.equal(rk, -k) and torch.equal(rv, v), layout


def test_strided_view_must_be_the_layouts():
    """a [L, B, H, N, C] view with the layout's strides is accepted; a FlashAttention-shaped one is refused
    naming the axis and both extents; so is a wrong stride"""
    with kvrt.Runtime() as rt:
        plan = _plan("LBNHC")
        raw = torch.zeros(plan["total_bytes"], dtype=torch.int8)
        typed = raw.view(torch.bfloat16)
        layer = plan["layers"]
        shape = [L] + layer[0]["shape"]
        strides = [layer[1]["offset_bytes"] // 2] + layer[0]["strides"]
        view = typed.as_strided(shape, strides)
        with rt.wrap(view, model=model(L, H, D, "bf16", BS), layout="LBNHC", backend="cpu") as c:
            assert torch.from_dlpack(c.layer(1)).data_ptr() == raw.data_ptr() + layer[1]["offset_bytes"]
            assert torch.from_dlpack(c.all_layers()).stride() == view.stride()
        # vLLM's FlashAttention cache is [2, B, BS, H, D] per layer: not kvrt's model.
        fa = typed[:2 * B * BS * H * D].view(2, B, BS, H, D)
        e = raises(kvrt.InvalidArgumentError, rt.wrap, fa, model=model(L, H, D, "bf16", BS), layout="LBNHC",
                   backend="cpu")
        msg = str(e)
        assert "axis 0 (L)" in msg and "extent 2" in msg and "has %d" % L in msg, msg
        # The HND strides on an NHD cache: heads and tokens swapped.
        bad = typed.as_strided(shape, [strides[0], strides[1], strides[3], strides[2], 1])
        e = raises(kvrt.InvalidArgumentError, rt.wrap, bad, model=model(L, H, D, "bf16", BS), layout="LBNHC",
                   backend="cpu")
        want = "axis 2 (H) of the tensor has stride %d but the LBNHC view of the cache has %d" % (strides[3],
                                                                                                 strides[2])
        assert want in str(e), str(e)


def test_deleter_runs_once():
    """numpy: the array is held while the cache or a view of it lives, and given back exactly once;
    a refused wrap gives it back at once"""
    with kvrt.Runtime() as rt:
        plan = _plan("BLHNC")
        arr = numpy.zeros(plan["total_bytes"], dtype=numpy.uint8)
        base = sys.getrefcount(arr)
        c = rt.wrap(arr, model=model(L, H, D, "bf16", BS), layout="BLHNC", backend="cpu")
        assert sys.getrefcount(arr) == base + 1, (sys.getrefcount(arr), base)
        view = torch.from_dlpack(c.layer(0))
        c.close()
        assert sys.getrefcount(arr) == base + 1, "a view still holds the cache's memory"
        del view
        assert sys.getrefcount(arr) == base, (sys.getrefcount(arr), base)

        short = numpy.zeros(plan["total_bytes"] - 1, dtype=numpy.uint8)
        base = sys.getrefcount(short)
        e = raises(kvrt.InvalidArgumentError, rt.wrap, short, model=model(L, H, D, "bf16", BS), layout="BLHNC",
                   backend="cpu", blocks=B)
        msg = str(e)
        del e  # its traceback holds the frame that held the array
        assert "needs" in msg, msg
        assert sys.getrefcount(short) == base, "a refused tensor is given back"


def test_torch_memory_outlives_the_callers_reference():
    """the cache keeps a torch tensor's memory after the caller drops it, until the runtime closes"""
    rt = kvrt.Runtime()
    plan = _plan("LBHNC", "fp32")
    raw = torch.zeros(plan["total_bytes"] // 4, dtype=torch.float32)
    c = rt.wrap(raw, model=model(L, H, D, "fp32", BS), layout="LBHNC", backend="cpu")
    del raw
    slots = torch.tensor([0, 9], dtype=torch.int64)
    k, v = _tokens("fp32", 2, 3), _tokens("fp32", 2, 4)
    c.write(1, slots, k, v)
    rk, rv = c.read(1, slots)
    assert torch.equal(rk, k) and torch.equal(rv, v)
    rt.close()


def test_wrap_model_file():
    """a published config.json sized as vLLM sizes it: the blocks the tensor holds, every layer aliasing it"""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models",
                        "llama-3.1-8b.json")
    plan = kvrt.plan(model=path, blocks=2, layout="HND")
    raw = torch.zeros(plan["total_bytes"], dtype=torch.int8)
    with kvrt.Runtime() as rt:
        with rt.wrap(raw, model=path, layout="HND", backend="cpu") as c:
            assert c.num_blocks == 2 and c.num_layers == 32, (c.num_blocks, c.num_layers)
            t = torch.from_dlpack(c.layer(31))
            s = plan["sets"][0]
            assert t.data_ptr() == raw.data_ptr() + s["offset"] + 31 * s["layer_stride"]


def test_wrap_refusals():
    """a model file that does not exist; a backend that cannot adopt memory (opencl, when it has a device);
    the cpu backend says it adopts memory aligned to 4 bytes"""
    with kvrt.Runtime() as rt:
        raw = torch.zeros(1 << 16, dtype=torch.int8)
        e = raises(kvrt.Error, rt.wrap, raw, model="no/such/config.json", layout="LBHNC", backend="cpu")
        assert "no/such/config.json" in str(e), str(e)
        names = [p["name"] for p in rt.plugins]
        if "opencl" in names and [p for p in rt.plugins if p["name"] == "opencl"][0]["available"]:
            e = raises(kvrt.Error, rt.wrap, raw, model=model(L, H, D, "fp32", BS), layout="LBHNC",
                       backend="opencl")
            assert "opencl" in str(e), str(e)
        cpu = [p for p in rt.plugins if p["name"] == "cpu"][0]
        assert cpu["import_alignment"] == 4, cpu
