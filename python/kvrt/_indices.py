"""Index lists handed to libkvrt, libkvrt-xfer and libkvrt-store: block ids,
block tables, slots, copy pairs, sequence lengths, token ids.

ctypes wraps an integer that does not fit its C type without a word:
``(c_int64 * 1)(2**64 + 1)`` holds 1, so a caller's mistake would read or
write another block.  Every public call that takes indices converts them
here, the one place: each value is checked against the C type's range and
the first that does not fit, or is no integer at all (a float, a bool, a
string), is refused naming the argument, its position, the value and the
valid range.

Accepted: lists, tuples and ranges of integers (Python ints, or numpy and
torch integer scalars), and host tensors of any integer type through DLPack
(numpy arrays, torch tensors, any shape, strided or not: read in row-major
order) whose values are checked one by one, not only their type.
"""
import ctypes as C
import itertools
import operator

from ._dlpack import Borrowed
from ._errors import InvalidArgumentError

# The C types index arrays have, with their names and ranges.
_C_TYPES = {
    C.c_int32: ("int32", -(1 << 31), (1 << 31) - 1),
    C.c_int64: ("int64", -(1 << 63), (1 << 63) - 1),
}
# DLPack's integer element types: (type code, bits) -> the ctypes element.
_DL_INTS = {(0, 8): C.c_int8, (0, 16): C.c_int16, (0, 32): C.c_int32, (0, 64): C.c_int64,
            (1, 8): C.c_uint8, (1, 16): C.c_uint16, (1, 32): C.c_uint32, (1, 64): C.c_uint64}
_DL_KINDS = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}


def _is_bool(v):
    """bool, numpy.bool_ and torch bool scalars: each has __index__, and a
    True taken for block 1 is a mistake, not an index."""
    if isinstance(v, bool):
        return True
    return "bool" in str(getattr(v, "dtype", ""))


def _refuse(what, where, value, ctype, why=""):
    name, lo, hi = _C_TYPES[ctype]
    raise InvalidArgumentError("%s%s is %s%s; valid are integers from %d to %d (%s)"
                               % (what, where, value, why, lo, hi, name))


def _position(i, shape):
    """Flat index i as the [i] or [i, j, ...] of a value in `shape`."""
    if len(shape) <= 1:
        return "[%d]" % i
    at = []
    for n in reversed(shape):
        at.append(i % n)
        i //= n
    return "[%s]" % ", ".join(str(x) for x in reversed(at))


def _from_sequence(values, ctype, what):
    _name, lo, hi = _C_TYPES[ctype]
    out = []
    for i, v in enumerate(values):
        if _is_bool(v):
            _refuse(what, "[%d]" % i, repr(v), ctype, ", a bool")
        try:
            x = v if isinstance(v, int) else operator.index(v)
        except TypeError:
            _refuse(what, "[%d]" % i, repr(v), ctype, ", a %s" % type(v).__name__)
        if not lo <= x <= hi:
            _refuse(what, "[%d]" % i, x, ctype, ", outside the range")
        out.append(x)
    return (ctype * max(1, len(out)))(*out), len(out)


def _tensor_values(b, elem):
    """The tensor's values as Python ints, in row-major order."""
    if b.numel == 0:
        return []
    if b.contiguous():
        return (elem * b.numel).from_address(b.address)[:]
    size = C.sizeof(elem)
    return [elem.from_address(b.address + size * sum(i * s for i, s in zip(at, b.strides))).value
            for at in itertools.product(*(range(n) for n in b.shape))]


def _from_tensor(values, ctype, what):
    name, lo, hi = _C_TYPES[ctype]
    if _is_bool(values):
        raise InvalidArgumentError("%s: a tensor of bools; give integers from %d to %d (%s)" % (what, lo, hi, name))
    try:
        b = Borrowed(values, what)
    except (RuntimeError, BufferError, TypeError, ValueError) as e:
        raise InvalidArgumentError("%s: a %s that gives no DLPack tensor (%s); give a list or an integer "
                                   "tensor of %s values" % (what, type(values).__name__, e, name)) from None
    with b:
        if b.device_type != 1:
            b.require()  # raises, naming the device
        elem = _DL_INTS.get((b.code, b.bits)) if b.lanes == 1 else None
        if elem is None:
            got = "%s%d" % (_DL_KINDS.get(b.code, "type code %d, " % b.code), b.bits)
            if b.lanes != 1:
                got += "x%d" % b.lanes
            raise InvalidArgumentError("%s: element type %s; give integers from %d to %d (%s): a list or a "
                                       "tensor of an integer type" % (what, got, lo, hi, name))
        n = b.numel
        arr = (ctype * max(1, n))()
        if elem is ctype and b.contiguous():
            C.memmove(arr, b.address, n * C.sizeof(ctype))
            return arr, n
        for i, x in enumerate(_tensor_values(b, elem)):
            if not lo <= x <= hi:
                _refuse(what, _position(i, b.shape), x, ctype, ", outside the range")
            arr[i] = x
        return arr, n


def index_array(values, ctype, what):
    """A ctypes array (at least one element long) of `values` for a C array
    of `ctype` (c_int32 or c_int64), and the number of values; `what` is
    the argument's name for the errors."""
    if ctype not in _C_TYPES:
        raise TypeError("index_array: no range for %r" % (ctype,))
    if isinstance(values, (list, tuple, range)):
        return _from_sequence(values, ctype, what)
    if isinstance(values, (str, bytes, bytearray, memoryview, int, float, dict, set)) or values is None:
        name, lo, hi = _C_TYPES[ctype]
        raise InvalidArgumentError("%s: %r is no list of indices; give a list, tuple, range or integer tensor "
                                   "of values from %d to %d (%s)" % (what, values, lo, hi, name))
    return _from_tensor(values, ctype, what)
