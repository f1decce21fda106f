"""layouts/plan/resolve hand back libkvrt's own JSON, and their keywords
mean what the tool's flags mean; errors are kvrt.Error subclasses carrying
libkvrt's message; context managers."""
import os

import torch

import kvrt
from common import LAYOUTS, Skip, as_python, cli, model, raises


def test_layouts_are_libkvrts():
    """kvrt.layouts() is libkvrt's answer: every layout and alias of kvrt_layout_valid_names"""
    got = kvrt.layouts()
    names = kvrt._clib.kvrt_layout_valid_names().decode().split(", ")
    assert got["valid_names"] == names and [l["name"] for l in got["layouts"]] == LAYOUTS, got
    assert all(got["aliases"][a] in LAYOUTS for a in names[len(LAYOUTS):]) and got["env"] == "VLLM_KV_CACHE_LAYOUT"


def test_plan_keywords_match_flags():
    """kvrt.plan(keywords) asks libkvrt what kvrt plan --json (flags) asks it: attention, MLA, state,
    kernel splitting and a budget"""
    cases = [
        (dict(layers=3, blocks=10, block_size=16, kv_heads=8, head_size=128, dtype="bf16", layout="HND"),
         ["--layers", "3", "--blocks", "10", "--block-size", "16", "--kv-heads", "8", "--head-size", "128",
          "--dtype", "bf16", "--layout", "HND"]),
        (dict(layers=2, blocks=5, block_size=16, kind="mla", head_size=576, layout="BLNHC"),
         ["--layers", "2", "--blocks", "5", "--block-size", "16", "--kind", "mla", "--head-size", "576",
          "--layout", "BLNHC"]),
        (dict(layers=2, blocks=3, block_size=64, kind="state", state_content_bytes=4096, layout="LBHNC"),
         ["--layers", "2", "--blocks", "3", "--block-size", "64", "--kind", "state", "--state-content-bytes",
          "4096", "--layout", "LBHNC"]),
        (dict(layers=2, blocks=4, block_size=32, kv_heads=2, head_size=64, kernel_block_size=16, layout="LBNHC"),
         ["--layers", "2", "--blocks", "4", "--block-size", "32", "--kv-heads", "2", "--head-size", "64",
          "--kernel-block-size", "16", "--layout", "LBNHC"]),
        (dict(layers=4, memory=1 << 20, block_size=16, kv_heads=4, head_size=64),
         ["--layers", "4", "--memory", str(1 << 20), "--block-size", "16", "--kv-heads", "4", "--head-size", "64"]),
    ]
    for kw, args in cases:
        assert kvrt.plan(**kw) == as_python(cli("plan", "--json", *args)), args


def test_resolve_keywords_match_flags():
    """kvrt.resolve(keywords) asks libkvrt what kvrt resolve --json (flags) asks it, with and without
    VLLM_KV_CACHE_LAYOUT"""
    assert kvrt.resolve() == cli("resolve", "--json")
    got = kvrt.resolve(declare={"cuda": ["LBNHC", "LBHNC"], "cpu": "any"}, prefer="HND")
    assert got == as_python(cli("resolve", "--json", "--declare", "cuda=LBNHC,LBHNC", "--declare", "cpu=any",
                                "--prefer", "HND"))
    old = os.environ.get("VLLM_KV_CACHE_LAYOUT")
    os.environ["VLLM_KV_CACHE_LAYOUT"] = "HND"
    try:
        got = kvrt.resolve(declare={"a": "LBHNC,BLHNC", "b": ["HND"]}, mixed_shapes=True)
        want = cli("resolve", "--json", "--declare", "a=LBHNC,BLHNC", "--declare", "b=HND", "--mixed-shapes")
        assert got == want and got["env"] == "HND"
    finally:
        if old is None:
            del os.environ["VLLM_KV_CACHE_LAYOUT"]
        else:
            os.environ["VLLM_KV_CACHE_LAYOUT"] = old


def test_settings_are_libkvrts():
    """kvrt.settings() is libkvrt's answer: every variable it reads, its value and where that came from; and
    kvrt.plan says where its layout came from in the same words"""
    old = os.environ.get("VLLM_KV_CACHE_LAYOUT")
    os.environ["VLLM_KV_CACHE_LAYOUT"] = "HND"
    try:
        got = kvrt.settings()
        layout = got["VLLM_KV_CACHE_LAYOUT"]
        assert layout["value"] == "HND" and layout["source"] == "environment" and layout["summary"], got
        assert list(got) == [kvrt._clib.kvrt_setting_variable(s).decode() for s in range(kvrt._lib.NUM_SETTINGS)], got
        spec = dict(layers=1, blocks=1, block_size=16, kv_heads=1, head_size=8)
        assert kvrt.plan(**spec)["layout_source"] == "VLLM_KV_CACHE_LAYOUT"
        assert kvrt.plan(layout="BLHNC", **spec)["layout_source"] == "layout"
        del os.environ["VLLM_KV_CACHE_LAYOUT"]
        assert kvrt.settings()["VLLM_KV_CACHE_LAYOUT"]["source"] == "default"
        assert kvrt.plan(**spec)["layout_source"] == "default"
    finally:
        if old is None:
            os.environ.pop("VLLM_KV_CACHE_LAYOUT", None)
        else:
            os.environ["VLLM_KV_CACHE_LAYOUT"] = old


def test_errors_carry_c_message():
    """errors are kvrt.Error subclasses with libkvrt's message"""
    e = raises(kvrt.InvalidArgumentError, kvrt.plan, layers=1, blocks=1, block_size=16, kv_heads=1, head_size=8,
               layout="NHW")
    assert isinstance(e, kvrt.Error) and isinstance(e, ValueError) and e.status == -1
    assert "NHW" in str(e) and "LBNHC" in str(e), str(e)
    with kvrt.Runtime() as rt:
        e = raises(kvrt.NoDeviceError, rt.cache, model=model(), blocks=2, backend="nosuch")
        assert 'no backend named "nosuch"' in e.message, e.message
        old = os.environ.get("VLLM_KV_CACHE_LAYOUT")
        os.environ["VLLM_KV_CACHE_LAYOUT"] = "HND"
        try:
            e = raises(kvrt.RefusedError, kvrt.resolve, declare={"cuda": ["LBNHC"]})
            assert "HND" in str(e) and "cuda" in str(e), str(e)
        finally:
            if old is None:
                del os.environ["VLLM_KV_CACHE_LAYOUT"]
            else:
                os.environ["VLLM_KV_CACHE_LAYOUT"] = old
        mla = rt.cache(model={"layers": 2, "kind": "mla", "head_size": 16, "dtype": "fp32", "block_size": 4},
                       layout="LBNHC", blocks=2, backend="cpu")
        e = raises(kvrt.InvalidArgumentError, mla.v(1).__dlpack__)
        assert "no separate V" in str(e) and "MLA" in str(e), str(e)
        assert torch.from_dlpack(mla.k(1)).shape[-1] == 16
        e = raises(kvrt.InvalidArgumentError, mla.layer, 2)
        assert "out of range" in str(e)
        c = rt.cache(model=model(), layout="LBNHC", blocks=2, backend="cpu")
        e = raises(kvrt.InvalidArgumentError, c.write, 0, [0, 1], torch.zeros((2, 2, 8)), torch.zeros((2, 2, 8)))
        assert "float32" in str(e) or "fp32" in str(e), str(e)
        e = raises(kvrt.InvalidArgumentError, c.write, 0, [0, 1], torch.zeros((2, 3, 8), dtype=torch.bfloat16))
        assert "[2, 3, 8]" in str(e) and "[2, 2, 8]" in str(e), str(e)
        e = raises(kvrt.InvalidArgumentError, c.write, 0, [0, 99], torch.zeros((2, 2, 8), dtype=torch.bfloat16),
                   torch.zeros((2, 2, 8), dtype=torch.bfloat16))
        assert "99" in str(e), str(e)   # the C API's slot check
        e = raises(kvrt.InvalidArgumentError, c.copy_blocks, [(0, 7)])
        assert "7" in str(e), str(e)
        wide = torch.zeros((2, 2, 16), dtype=torch.bfloat16)
        e = raises(kvrt.InvalidArgumentError, c.write, 0, [0, 1], wide[:, :, :8], wide[:, :, 8:])
        assert "not contiguous" in str(e), str(e)
        c.close()
        e = raises(kvrt.StateError, c.layer, 0)
        assert "closed" in str(e)
    e = raises(kvrt.StateError, lambda: rt.plugins)


def test_opencl_export_refused():
    """an OpenCL cache cannot be exported: UnsupportedError naming the backend (skipped without PoCL)"""
    with kvrt.Runtime() as rt:
        cl = [p for p in rt.plugins if p["name"] == "opencl"]
        if not cl or not cl[0]["available"]:
            raise Skip("the opencl backend is not built or has no device: %s"
                       % (cl[0]["reason"] if cl else "not found"))
        assert cl[0]["memory"] == "opaque"
        layout = cl[0]["layouts"][0] if cl[0]["layouts"] != "any" else "LBNHC"
        with rt.cache(model=model(dtype="fp32"), layout=layout, blocks=2, backend="opencl") as c:
            e = raises(kvrt.UnsupportedError, torch.from_dlpack, c.layer(1))
            assert '"opencl"' in str(e), str(e)
            # Operations still work: they stage through kvrt buffers.
            c.write(1, [0, 5], torch.ones((2, 2, 8)), torch.zeros((2, 2, 8)))
            k, v = c.read(1, [5])
            assert float(k.sum()) == 16.0 and float(v.sum()) == 0.0


def test_trace_steps():
    """resolve()["steps"] and Runtime.trace_steps give each step's kind, layout and backend"""
    old = os.environ.pop("VLLM_KV_CACHE_LAYOUT", None)
    try:
        got = kvrt.resolve(declare={"cuda": ["LBNHC", "LBHNC"], "opencl": ["LBHNC", "LBNHC"]}, prefer="BLHNC")
    finally:
        if old is not None:
            os.environ["VLLM_KV_CACHE_LAYOUT"] = old
    steps = got["steps"]
    assert [s["step"] for s in steps] == ["resolve", "declaration", "declaration", "intersection", "votes",
                                          "ranking", "shapes", "candidates", "env", "preference", "choice",
                                          "recorded"], steps
    assert [s.get("backend") for s in steps[1:3]] == ["cuda", "opencl"]
    assert steps[9]["layout"] == "BLHNC" and "not a candidate" in steps[9]["text"] and got["warning"]
    assert steps[10]["layout"] == got["layout"] == "LBHNC" and "backend" not in steps[10]
    assert all(line.endswith(s["text"]) for line, s in zip(got["trace"], steps))
    with kvrt.Runtime() as rt:
        with rt.cache(model=model(), blocks=3, backend="cpu") as c:
            bound = [s for s in rt.trace_steps if s["step"] == "bound"]
            assert bound and bound[-1]["backend"] == "cpu" and bound[-1]["layout"] == c.layout, rt.trace_steps
            assert [s for s in rt.trace_steps if s["step"] == "recorded"][-1]["layout"] == c.layout


def test_runtime_plugins_and_context_managers():
    """Runtime.plugins lists cpu; caches and runtimes close on exit"""
    with kvrt.Runtime() as rt:
        names = [p["name"] for p in rt.plugins]
        assert "cpu" in names
        cpu = [p for p in rt.plugins if p["name"] == "cpu"][0]
        assert cpu["available"] and "bf16" in cpu["dtypes"]
        assert cpu["memory"] == "host" and cpu["device_type"] == "cpu"
        with rt.cache(model=model(), blocks=3, backend="cpu") as c:
            assert c.layout in LAYOUTS and c.backend == "cpu" and c.num_layers == 4
            assert c.layer_names == ["layer.%d" % i for i in range(4)]
        assert c._h is None
        g = rt.cache(model={"groups": [{"layers": [{"name": "full.0", "kv_heads": 2, "head_size": 8,
                                                     "block_size": 4, "dtype": "fp32"}]},
                                       {"layers": [{"name": "swa.0", "kv_heads": 2, "head_size": 8,
                                                    "block_size": 4, "dtype": "fp32"}]}]},
                     layout="LBNHC", blocks=3, backend="cpu")
        assert g.layer_names == ["full.0", "swa.0"]
        e = raises(kvrt.InvalidArgumentError, g.all_layers().__dlpack__)
        assert "one by one" in str(e)
        assert torch.from_dlpack(g.layer("swa.0")).shape == (3, 2, 4, 16)
    assert rt._h.value is None
