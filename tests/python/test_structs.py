"""The package's one binding (kvrt/_lib.py) against C: every struct it
mirrors has C's size and C's fields, by name, in order, at C's offsets, and
every macro it mirrors C's value.  The C side is a helper generated from the
public headers (struct_offsets.py), so a field added in C is caught here
until the mirror has it."""
import ctypes
import inspect
import json
import os
import subprocess

from kvrt import _lib

try:  # libkvrt-xfer's binding, where it was built (UCX found)
    from kvrt import xfer as _xfer
    BINDINGS = [_lib, _xfer]
except ImportError:
    _xfer = None
    BINDINGS = [_lib]
try:  # libkvrt-store's, where it was built
    from kvrt import store as _store
    BINDINGS.append(_store)
except ImportError:
    _store = None


def c_side():
    out = subprocess.run([os.environ["KVRT_STRUCT_OFFSETS"]], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def mirrors():
    return [cls for mod in BINDINGS for _, cls in inspect.getmembers(mod, inspect.isclass)
            if issubclass(cls, ctypes.Structure) and cls.__module__ == mod.__name__]


def test_every_mirror_names_a_c_struct():
    """each ctypes Structure of the binding names its C struct, and C has it"""
    structs = c_side()["structs"]
    found = mirrors()
    assert len(found) >= (20 if _xfer else 15), [c.__name__ for c in found]
    for cls in found:
        name = getattr(cls, "_c_name", None)
        assert name in structs, "%s mirrors %r, which the headers do not define" % (cls.__name__, name)


def test_sizes_and_offsets_match_c():
    """ctypes.sizeof and every field's name and offset equal C's"""
    structs = c_side()["structs"]
    bad = []
    for cls in mirrors():
        c = structs[cls._c_name]
        mine = [[f[0], getattr(cls, f[0]).offset] for f in cls._fields_]
        if ctypes.sizeof(cls) != c["size"]:
            bad.append("%s: sizeof %d, C %d" % (cls._c_name, ctypes.sizeof(cls), c["size"]))
        if mine != c["fields"]:
            bad.append("%s: fields %s, C %s" % (cls._c_name, mine, c["fields"]))
    assert not bad, "\n".join(bad)


def test_soname_is_the_librarys():
    """the name each binding falls back to is the soname of the library it loaded"""
    for mod, path in [(_lib, _lib.path)] + ([(_xfer, _xfer.library_path)] if _xfer else []) + (
            [(_store, _store.library_path)] if _store else []):
        loaded = os.path.basename(os.path.realpath(path))
        assert loaded == mod.SONAME or loaded.startswith(mod.SONAME + "."), (loaded, mod.SONAME)


def test_constants_match_c():
    """the macros the binding mirrors have C's values"""
    defines = c_side()["defines"]
    for name, value in [kv for mod in BINDINGS for kv in mod.C_CONSTANTS.items()]:
        assert name in defines, "%s is not among the helper's macros %s" % (name, sorted(defines))
        assert value % (1 << 64) == defines[name], "%s: %d here, %d in C" % (name, value, defines[name])
