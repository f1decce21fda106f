"""Mixed shapes from Python: Runtime.cache lets libkvrt judge the groups'
shapes, so layers that differ only in element type or only in block size
narrow the resolution to layouts their placement accepts."""
import os

import kvrt
from common import Skip, raises

LAYER = {"kv_heads": 2, "head_size": 8, "block_size": 4, "dtype": "fp16"}


def groups(*extras):
    """One group per extra: two layers of LAYER updated with the extra."""
    out = []
    for g, extra in enumerate(extras):
        spec = dict(LAYER, **extra)
        out.append({"layers": [dict(spec, name="g%d.%d" % (g, i)) for i in range(2)]})
    return {"groups": out}


def steps(rt, kind):
    return [s for s in rt.trace_steps if s["step"] == kind]


def with_env(value, fn, *args, **kw):
    old = os.environ.get("VLLM_KV_CACHE_LAYOUT")
    os.environ["VLLM_KV_CACHE_LAYOUT"] = value
    try:
        return fn(*args, **kw)
    finally:
        if old is None:
            del os.environ["VLLM_KV_CACHE_LAYOUT"]
        else:
            os.environ["VLLM_KV_CACHE_LAYOUT"] = old


def test_dtype_only_mixes():
    """groups that differ only in dtype mix shapes: narrowed to a layout their placement accepts"""
    with kvrt.Runtime() as rt:
        with rt.cache(model=groups({}, {"dtype": "fp32"}), blocks=3, backend="cpu") as c:
            assert c.layout in ("BLHNC", "BLNHC"), c.layout
        assert steps(rt, "narrowing") and "overlay with different page sizes" in steps(rt, "narrowing")[0]["text"]
    with kvrt.Runtime() as rt:
        # Resolution refuses by shape, before any placement is tried.
        e = raises(kvrt.RefusedError, with_env, "LBHNC", rt.cache, model=groups({}, {"dtype": "fp32"}), blocks=3,
                   backend="cpu")
        assert "LBHNC" in str(e) and "page sizes" in str(e), str(e)
        assert steps(rt, "narrowing"), rt.trace_steps


def test_block_size_only_mixes():
    """groups that differ only in block size mix shapes too (the cache then refuses two block sizes)"""
    with kvrt.Runtime() as rt:
        e = raises(kvrt.InvalidArgumentError, rt.cache, model=groups({}, {"block_size": 8}), blocks=3, backend="cpu")
        assert "block_size" in str(e), str(e)
        narrowed = steps(rt, "narrowing")
        assert narrowed and "BLHNC" in narrowed[0]["text"] and "ruled out" in narrowed[0]["text"], rt.trace_steps
        assert steps(rt, "recorded")[-1]["layout"] in ("BLHNC", "BLNHC"), rt.trace_steps


def test_one_group_needs_block_compact_only():
    """layers of one group that differ only in dtype: block-compact layouts, outermost or not"""
    model = {"groups": [{"layers": [dict(LAYER, name="a"), dict(LAYER, name="b", dtype="fp32")]}]}
    with kvrt.Runtime() as rt:
        with with_env("LBNHC", rt.cache, model=model, blocks=3, backend="cpu") as c:
            assert c.layout == "LBNHC"
        assert "head, state or page shapes" in steps(rt, "narrowing")[0]["text"], rt.trace_steps
    with kvrt.Runtime() as rt:
        e = raises(kvrt.RefusedError, with_env, "LHBNC", rt.cache, model=model, blocks=3, backend="cpu")
        assert "LHBNC" in str(e), str(e)


def test_uniform_groups_do_not_mix():
    """identical groups share one shape: no narrowing, any layout"""
    with kvrt.Runtime() as rt:
        with with_env("LHBNC", rt.cache, model=groups({}, {}), blocks=3, backend="cpu") as c:
            assert c.layout == "LHBNC"
        assert steps(rt, "shapes") and not steps(rt, "narrowing"), rt.trace_steps


def test_layer_compact_first_backend():
    """a backend whose first choice is LBHNC (opencl) still gets a placeable layout (skipped without PoCL)"""
    with kvrt.Runtime() as rt:
        cl = [p for p in rt.plugins if p["name"] == "opencl"]
        if not cl or not cl[0]["available"]:
            raise Skip("the opencl backend is not built or has no device: %s" % (cl[0]["reason"] if cl else "not found"))
        if cl[0]["layouts"] == "any" or cl[0]["layouts"][0] in ("BLHNC", "BLNHC"):
            raise Skip("opencl's first choice %s would not show the narrowing" % (cl[0]["layouts"],))
        with rt.cache(model=groups({}, {"dtype": "fp32"}), blocks=3, backend="opencl") as c:
            assert c.layout in ("BLHNC", "BLNHC"), c.layout
