"""kvrt from Python: the physical layout of a paged KV cache, and zero-copy
DLPack views of caches kvrt allocates or lays over an engine's own tensors
(Runtime.wrap).

Pure Python over libkvrt with ctypes.  Quick start::

    import kvrt, torch
    with kvrt.Runtime() as rt:
        cache = rt.cache(model={"layers": 4, "kv_heads": 8, "head_size": 128, "dtype": "bf16"},
                         layout="HND", blocks=64, backend="cpu")
        k3 = torch.from_dlpack(cache.k(3))   # [blocks, heads, tokens, head_size]

See docs/python.md.
"""
from ._errors import (Error, InvalidArgumentError, SizeOverflowError, OutOfMemoryError, RefusedError,
                      NoDeviceError, StateError, DeviceError, UnsupportedError, PluginError, InternalError)
from ._lib import lib as _clib, path as library_path
from .info import layouts, plan, resolve, settings
from .parallel import pp_layers, pp_partition, tp_heads, tp_map
from ._prom import metrics, MetricsCollector
from .runtime import Runtime, Cache, TensorView

__version__ = _clib.kvrt_version().decode()


def __getattr__(name):
    # kvrt.Store is libkvrt-store's, built only where its libraries are: it
    # is imported when first asked for, so `import kvrt` works without it.
    if name == "Store":
        from .store import Store
        return Store
    raise AttributeError("module 'kvrt' has no attribute %r" % name)


def live_tensors():
    """Tensors exported by libkvrt in this process whose deleter has not run."""
    return _clib.kvrt_dlpack_live_tensors()


__all__ = ["Error", "InvalidArgumentError", "SizeOverflowError", "OutOfMemoryError", "RefusedError",
           "NoDeviceError", "StateError", "DeviceError", "UnsupportedError", "PluginError", "InternalError",
           "layouts", "plan", "resolve", "settings", "Runtime", "Cache", "TensorView", "live_tensors", "library_path",
           "tp_heads", "tp_map", "pp_layers", "pp_partition", "Store", "metrics", "MetricsCollector"]
