"""Helpers shared by the Python tests."""
import json
import os
import subprocess

import torch

import kvrt

LAYOUTS = ["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]
TORCH = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


class Skip(Exception):
    """Raised by a test that cannot run here; the runner reports SKIP with the message."""


def cli(*args, env=None):
    """`kvrt ARGS --json` of the build's tool, parsed."""
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run([os.environ["KVRT_CLI"]] + list(args), capture_output=True, text=True, env=e)
    assert out.returncode == 0, "kvrt %s: exit %d: %s" % (" ".join(args), out.returncode, out.stderr)
    return json.loads(out.stdout)


# How each front end names the argument it passed: the answers are libkvrt's,
# the words for where a value came from are the caller's own.
AS_PYTHON = {"--layout": "layout", "the command line (--prefer)": "kvrt.resolve(prefer=)"}


def as_python(answer):
    """A tool's JSON answer as the Python call that asks the same gets it: the
    tool's name for an argument replaced by the keyword's."""
    if isinstance(answer, dict):
        return {k: as_python(v) for k, v in answer.items()}
    if isinstance(answer, list):
        return [as_python(v) for v in answer]
    if isinstance(answer, str):
        for tool, python in AS_PYTHON.items():
            answer = answer.replace(tool, python)
    return answer


def model(layers=4, kv_heads=2, head_size=8, dtype="bf16", block_size=4, **kw):
    m = {"layers": layers, "kv_heads": kv_heads, "head_size": head_size, "dtype": dtype, "block_size": block_size}
    m.update(kw)
    return m


def raises(cls, fn, *args, **kw):
    """Run fn, expect cls; return the exception."""
    try:
        fn(*args, **kw)
    except cls as e:
        return e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), cls.__name__))
