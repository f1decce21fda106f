"""Capsules and tensors: each deleter runs exactly once, consumed or not,
and tensors outlive the Python objects they came from."""
import gc

import numpy
import torch

import kvrt
from common import model


def test_deleter_once_per_capsule():
    """the deleter runs exactly once per capsule, consumed or not"""
    gc.collect()
    base = kvrt.live_tensors()
    with kvrt.Runtime() as rt, rt.cache(model=model(), layout="LBNHC", blocks=4, backend="cpu") as c:
        caps = [c.layer(1).__dlpack__() for _ in range(4)]
        assert kvrt.live_tensors() == base + 4
        del caps[3]                      # never consumed: its destructor deletes it
        assert kvrt.live_tensors() == base + 3
        t0 = torch.from_dlpack(caps[0])  # consumed: torch owns it now
        t1 = torch.utils.dlpack.from_dlpack(caps[1])
        del caps[:2]                     # consumed capsules must not delete
        assert kvrt.live_tensors() == base + 3
        del t0
        assert kvrt.live_tensors() == base + 2
        del t1
        assert kvrt.live_tensors() == base + 1
        del caps
        gc.collect()
        assert kvrt.live_tensors() == base
        # numpy refuses bfloat16 after taking nothing: the capsule still deletes once.
        try:
            numpy.from_dlpack(c.v(2))
            raise AssertionError("numpy took a bfloat16 tensor")
        except RuntimeError as e:
            assert "dtype" in str(e), str(e)   # numpy's own error, not a SystemError from the destructor
        gc.collect()
        assert kvrt.live_tensors() == base
    with kvrt.Runtime() as rt, rt.cache(model=model(dtype="fp32"), layout="LBNHC", blocks=4, backend="cpu") as c:
        a = numpy.from_dlpack(c.v(2))
        assert kvrt.live_tensors() == base + 1
        del a
        gc.collect()
        assert kvrt.live_tensors() == base
        assert c.layer(0).__dlpack_device__() == (1, 0)
        assert kvrt.live_tensors() == base


def test_tensor_outlives_cache_and_runtime():
    """a tensor outlives the Python cache object (and a closed runtime) safely"""
    gc.collect()
    base = kvrt.live_tensors()
    rt = kvrt.Runtime()
    c = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
    t = torch.from_dlpack(c.layer(2))
    t.fill_(7.0)
    del c                     # the last reference: kvrt_cache_destroy runs now
    gc.collect()
    assert float(t.sum()) == 7.0 * t.numel()
    t.add_(1.0)
    c1 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
    view = c1.k(1)
    c1.close()
    e = None
    try:
        view.__dlpack__()
    except kvrt.StateError as err:
        e = err
    assert e is not None and "closed" in str(e)
    c2 = rt.cache(model=model(dtype="fp32"), layout="HND", blocks=4, backend="cpu")
    u = torch.from_dlpack(c2.all_layers())
    rt.close()
    u.fill_(3.0)
    assert float(t.sum()) == 8.0 * t.numel() and float(u.mean()) == 3.0
    assert kvrt.live_tensors() == base + 2
    del t, u
    gc.collect()
    assert kvrt.live_tensors() == base


def test_refused_argument_is_given_back():
    """a tensor passed as an argument and refused (wrong shape) still has its deleter run"""
    gc.collect()
    base = kvrt.live_tensors()
    with kvrt.Runtime() as rt, rt.cache(model=model(dtype="fp32"), layout="LBNHC", blocks=4, backend="cpu") as c:
        for _ in range(3):
            try:
                c.read(0, [0, 1], v=c.k(1))   # a whole K view is not (slots, heads, head size)
                raise AssertionError("read accepted a V of the wrong shape")
            except kvrt.InvalidArgumentError as e:
                assert "v" in str(e), str(e)
        gc.collect()
        assert kvrt.live_tensors() == base, (kvrt.live_tensors(), base)
