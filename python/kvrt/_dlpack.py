"""DLPack in both directions with ctypes, no compiled extension.

Producing: a DLManagedTensor* from libkvrt becomes a PyCapsule named
"dltensor".  A consumer that takes it renames the capsule "used_dltensor"
and owns the tensor (it calls the deleter); the capsule's destructor calls
the deleter only when nobody took it, so each deleter runs exactly once.

Consuming: any object with __dlpack__ (torch, numpy, a kvrt view) or a
capsule gives its DLManagedTensor; kvrt renames the capsule, reads the
tensor and calls its deleter when done with it.
"""
import ctypes as C

from . import _lib
from ._closeable import Closeable
from ._errors import InvalidArgumentError

_NAME = b"dltensor"
_USED = b"used_dltensor"

_api = C.pythonapi
_capsule_new = _api.PyCapsule_New
_capsule_new.restype = C.py_object
_capsule_new.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]
_is_valid = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_char_p)(("PyCapsule_GetPointer", _api))
_set_name = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_char_p)(("PyCapsule_SetName", _api))

# The destructor is C code in libkvrt, not a ctypes callback: a consumer
# that fails (numpy refusing bfloat16, say) drops the capsule with its
# exception set, and no Python code may run then.
_destructor = C.cast(_lib.lib.kvrt_dlpack_capsule_destructor, C.c_void_p)


def capsule(managed):
    """Wrap a DLManagedTensor* (owned) in a "dltensor" capsule."""
    return _capsule_new(C.cast(managed, C.c_void_p), _NAME, _destructor)


DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
                10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}
# (DLPack type code, bits) -> kvrt dtype name
DTYPES = {(2, 32): "fp32", (2, 16): "fp16", (4, 16): "bf16", (0, 8): "int8", (1, 8): "uint8",
          (0, 32): "int32", (0, 64): "int64"}


class Borrowed(Closeable):
    """A consumed DLPack tensor: its host address, shape, type and device,
    held until close() runs the producer's deleter (also on garbage
    collection, so a tensor refused by require() is still given back)."""

    def __init__(self, obj, what):
        self.what = what
        if isinstance(obj, (bytes, bytearray, memoryview, list, tuple, int, float)):
            raise InvalidArgumentError("%s: a %s is not a tensor; pass a torch tensor, a numpy array or "
                                       "another object with __dlpack__" % (what, type(obj).__name__))
        cap = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
        if type(cap).__name__ != "PyCapsule" or not _is_valid(cap, _NAME):
            raise InvalidArgumentError("%s: %s is neither a DLPack tensor nor an unused \"dltensor\" capsule"
                                       % (what, type(obj).__name__))
        p = _get_pointer(cap, _NAME)
        _set_name(cap, _USED)
        self._mt = C.cast(p, C.POINTER(_lib.DLManagedTensor))
        t = self._mt.contents.dl_tensor
        self.device_type = t.device.device_type
        self.device_id = t.device.device_id
        self.ndim = t.ndim
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
        self.code, self.bits, self.lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
        self.dtype = DTYPES.get((self.code, self.bits)) if self.lanes == 1 else None
        self.address = (t.data or 0) + t.byte_offset
        self.numel = 1
        for n in self.shape:
            self.numel *= n
        self.nbytes = self.numel * self.bits // 8

    @property
    def managed(self):
        """The producer's DLManagedTensor* (still held by this object)."""
        return self._mt

    def release_to_kvrt(self):
        """libkvrt took the tensor (kvrt_cache_from_dlpack): it runs the
        deleter, once, when it lets go; this object no longer will."""
        self._mt = None

    def close(self):
        """Run the producer's deleter (once)."""
        if self._mt is not None:
            mt, self._mt = self._mt, None
            if mt.contents.deleter:
                mt.contents.deleter(mt)

    def contiguous(self):
        if self.strides is None:
            return True
        want = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != want:
                return False
            want *= n
        return True

    def require(self, dtype=None, shape=None, host=True):
        """Check the tensor is what an operation takes, else InvalidArgumentError."""
        if host and self.device_type != 1:
            raise InvalidArgumentError(
                "%s: the tensor is on %s:%d; kvrt operations take host tensors (DLPack kDLCPU), so "
                "copy it to the host first (e.g. .cpu())"
                % (self.what, DEVICE_NAMES.get(self.device_type, "device type %d" % self.device_type),
                   self.device_id))
        if dtype is not None and self.dtype != dtype:
            got = self.dtype or "DLPack type code %d, %d bits, %d lanes" % (self.code, self.bits, self.lanes)
            raise InvalidArgumentError("%s: element type %s; this needs %s" % (self.what, got, dtype))
        if shape is not None and tuple(shape) != self.shape:
            raise InvalidArgumentError("%s: shape %s; this needs %s" % (self.what, list(self.shape), list(shape)))
        if not self.contiguous():
            raise InvalidArgumentError("%s: shape %s with strides %s is not contiguous (row-major); pass a "
                                       "contiguous tensor (e.g. .contiguous())"
                                       % (self.what, list(self.shape), list(self.strides)))
        return self
