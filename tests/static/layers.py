#!/usr/bin/env python3
"""A library in layers: no include and no call runs up, no files call each
other in a circle.  One check for libkvrt (core/), libkvrt-xfer (xfer/) and
libkvrt-store (store/) alike.

Every source and header of the library names its layer in its opening
comment ("Layer N of libkvrt-store"); the base under libkvrt-xfer and
libkvrt-store (base/) says "Base of libkvrt-xfer and libkvrt-store" and is
below every layer of both.  This reads:

  - the layer lines, and every #include "..." (and, for the core, every
    #include <kvrt/...>, whose public headers each belong to a layer);
  - the calls between files, from the built objects: `nm` lists what each
    object defines (T, D, B, R) and needs (U), and a symbol one object
    needs and another of the same library defines is a call (or a use of
    its data) from the one file to the other.  The compiler resolved the
    names, so no regex guesses at C's syntax: a call hidden in a macro or
    made through a header declared elsewhere is seen too; only static
    functions, which never cross a file, are out of sight, and need not be
    seen.

It fails on a file without a layer, a source in another layer than its
own header's, what only some files may do (UCX's calls, LMDB's) done
elsewhere, an include or a call to a higher layer
(or between two folders kept apart, the core's models/ and runtime/), a
local include it cannot place, and files that call each other in a circle
(a strongly connected component of more than one file).

usage: layers.py SOURCE_ROOT LIBRARY [BUILD_DIR]   (TAP on stdout)
       layers.py --self-test                          (checks itself on a
                                                       small tree it builds)
LIBRARY: core, xfer or store.  Without BUILD_DIR (or without nm, or a
build without the library's objects) the calls are skipped, with the
reason.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

BASE_LINE = "Base of libkvrt-xfer and libkvrt-store"

# The core's public headers: the folder (room) whose layer each belongs to;
# None: no core file may include it (the umbrella, the companion libraries').
CORE_PUBLIC = {
    "common.h": "text", "version.h": "text", "settings.h": "settings",
    "layout.h": "values", "dtype.h": "values", "device.h": "values", "spec.h": "values",
    "geometry.h": "values", "placement.h": "values", "transfer.h": "values", "trace.h": "values",
    "resolve.h": "values", "parallel.h": "values", "model.h": "models",
    "runtime.h": "runtime", "backend.h": "runtime", "buffer.h": "runtime", "cache.h": "runtime",
    "ops.h": "runtime", "plugin.h": "runtime", "dlpack.h": "runtime", "wrap.h": "runtime",
    "kvrt.h": None, "xfer.h": None, "store.h": None,
}

# What only some files of a library may do: (pattern, the files that may:
# a set of names or a regex over the name, what).
XFER_CONFINED = [
    (r"\bucp_\w+\s*\(", {"transport.c"}, "every UCP call is in transport.c"),
    (r"#include <uc[pst]/", {"transport.c"}, "only the transport includes UCX's headers"),
]
STORE_CONFINED = [
    (r"\bmdb_\w+\s*\(",
     {"disk_parts.h", "disk.c", "disk_index.c", "disk_evict.c", "disk_write.c", "disk_list.c"},
     "LMDB is called from the disk tier's files that work on its index only"),
    # hiredis's API is camelCase (redisConnect, redisGetReply)
    (r"\bredis[A-Z]\w*\s*\(", r"(shared|resp|redis)\w*\.[ch]$", "hiredis is called from the shared tier's files only"),
]

LIBS = {
    # folder, name in layer lines, objects' folder glob (under BUILD_DIR),
    # folders kept apart, public header table, confined patterns
    "core": ("core", "libkvrt", "core/libkvrt.so*.p", ("models", "runtime"), CORE_PUBLIC, []),
    "xfer": ("xfer", "libkvrt-xfer", "xfer/libkvrt-xfer.so*.p", None, None, XFER_CONFINED),
    "store": ("store", "libkvrt-store", "store/libkvrt-store.so*.p", None, None, STORE_CONFINED),
}


class Tap:
    def __init__(self):
        self.n = 0

    def ok(self, cond, what, diag=()):
        self.n += 1
        print(("ok" if cond else "not ok") + " %d - %s" % (self.n, what))
        for d in diag:
            print("#   " + d)

    def skip(self, what, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, what, why))


def sources(folder):
    """Relative paths of every .c and .h below folder."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for name in names:
            if name.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(dirpath, name), folder))
    return sorted(out)


def opening(text):
    """The file's opening comment (the first /* ... */ or // lines)."""
    m = re.match(r"\s*(/\*.*?\*/|(?://[^\n]*\n)+|#![^\n]*\n)", text, re.S)
    return m.group(1) if m else ""


def resolve(lib_dir, files, rel, name):
    """The library file an #include "name" in file rel means, 'base' for the
    base, or None."""
    if name.startswith("base/"):
        return "base"
    here = os.path.dirname(rel)
    for cand in [os.path.normpath(os.path.join(here, name)), name]:
        if cand in files:
            return cand
    hits = [f for f in files if f.endswith("/" + name) and f.count("/") == name.count("/") + 1]
    return hits[0] if len(hits) == 1 else None


def symbols(paths):
    """{path: (defined, needed)} from one run of nm over every object."""
    out = {p: (set(), set()) for p in paths}
    if not paths:
        return out
    text = subprocess.run(["nm", "-A"] + sorted(paths), capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        parts = rest.split()
        if path not in out:
            continue
        if len(parts) == 3 and parts[1] in "TDBR":
            out[path][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            out[path][1].add(parts[1])
    return out


def circles(edges):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def check(lib_dir, libname, obj_dirs, apart, public, tap, base_dir=None, confined=()):
    """The checks of one library; returns whether all passed."""
    files = sources(lib_dir)
    layer, texts = {}, {}
    for f in files:
        texts[f] = open(os.path.join(lib_dir, f), encoding="utf-8", errors="replace").read()
        m = re.search(r"Layer (\d+) of %s\b" % re.escape(libname), opening(texts[f]))
        if m:
            layer[f] = int(m.group(1))
    failed = False

    def point(bad, what):
        nonlocal failed
        tap.ok(not bad, what, bad)
        failed = failed or bool(bad)

    def folder(f):
        return f.split("/")[0] if "/" in f else ""

    def apart_of(a, b):
        return apart and {folder(a), folder(b)} == set(apart)

    point([f for f in files if f not in layer],
          "every file of %s/ names its layer in its opening comment (%d files)" % (os.path.basename(lib_dir),
                                                                                  len(files)))
    up, unknown, arrows = [], [], 0
    for f in files:
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', texts[f], re.M):
            arrows += 1
            h = resolve(lib_dir, files, f, name)
            if h is None:
                unknown.append('%s includes "%s"' % (f, name))
            elif h != "base" and f in layer and h in layer and (layer[h] > layer[f] or apart_of(f, h)):
                up.append("%s (layer %d) includes %s (layer %d)" % (f, layer[f], h, layer[h]))
        if public is None:
            continue
        for name in re.findall(r"^\s*#\s*include\s+<kvrt/([^>]+)>", texts[f], re.M):
            arrows += 1
            room = public.get(name, "?")
            lows = [layer[g] for g in layer if folder(g) == room]
            if room == "?" or room is None:
                up.append("%s includes <kvrt/%s> (%s)" % (f, name, "not the core's" if room is None
                                                         else "a public header without a layer"))
            elif f in layer and (min(lows) > layer[f] or apart_of(f, room + "/")):
                up.append("%s (layer %d) includes <kvrt/%s> (of %s/, layer %d)" % (f, layer[f], name, room,
                                                                                  min(lows)))
    point(up, "no include runs up a layer%s (%d includes)" % (" or between %s/ and %s/" % apart if apart else "",
                                                              arrows))
    point(unknown, "every local include is a file of the library or of base/")
    if public is not None:
        rooms = {r for r in public.values() if r}
        point([f for f in files if folder(f) not in rooms],
              "every source is in a room (%s/)" % "/, ".join(sorted(rooms)))
        headers = os.path.join(os.path.dirname(os.path.abspath(lib_dir)), "include", "kvrt")
        point(sorted(h for h in os.listdir(headers) if h.endswith(".h") and h not in public),
              "every public header belongs to a room (or to no core file)")
    point(["%s is layer %d, %s layer %d" % (f, layer[f], f[:-2] + ".h", layer[f[:-2] + ".h"])
           for f in files if f.endswith(".c") and f in layer and layer.get(f[:-2] + ".h", layer[f]) != layer[f]],
          "a source is in its own header's layer")
    for pattern, allowed, what in confined:
        may = (lambda f, a=allowed: re.search(a, f)) if isinstance(allowed, str) else allowed.__contains__
        point([f for f in files if not may(f) and re.search(pattern, texts[f])], what)
    if base_dir is not None:
        bad = [f for f in sources(base_dir) if BASE_LINE not in opening(open(os.path.join(base_dir, f)).read())]
        point(bad, "every file of base/ says it is the base of libkvrt-xfer and libkvrt-store")

    if obj_dirs is None or isinstance(obj_dirs, str):
        why = obj_dirs or "no build folder given"
        tap.skip("no call runs up a layer", why)
        tap.skip("no files call each other in a circle", why)
        return not failed
    objs = {}
    for d in obj_dirs:
        for path in glob.glob(os.path.join(d, "*.c.o")):
            objs[os.path.basename(path)[:-len(".o")]] = path
    by_obj = {f.replace("/", "_"): f for f in files if f.endswith(".c")}
    mine = {path: by_obj[name] for name, path in objs.items() if name in by_obj}
    defined, needed = {}, {}
    for path, (d, u) in symbols(list(mine)).items():
        defined[mine[path]], needed[mine[path]] = d, u
    owner = {s: f for f, d in defined.items() for s in d}
    edges = {f: sorted({owner[s] for s in needed[f] if s in owner and owner[s] != f}) for f in defined}
    calls = sum(len(v) for v in edges.values())
    up = ["%s (layer %d) calls %s (layer %d): %s" % (f, layer[f], g, layer[g],
                                                   " ".join(sorted(s for s in needed[f] if owner.get(s) == g)))
          for f in sorted(edges) for g in edges[f]
          if f in layer and g in layer and (layer[g] > layer[f] or apart_of(f, g))]
    point(up, "no call runs up a layer (%d objects, %d arrows between files)" % (len(defined), calls))
    found = circles(edges)
    point(["circle: " + " ".join(c) for c in found], "no files call each other in a circle")
    levels = sorted(set(layer.values()))
    print("# layers: " + "; ".join("%d: %s" % (lv, " ".join(f for f in files if layer.get(f) == lv))
                                   for lv in levels))
    return not failed


def self_test(tap):
    """A small tree with an upward call, a circle, an upward include and a
    file without a layer: each must be caught; the tree without them must
    pass."""
    if not shutil.which("nm") or not shutil.which("cc"):
        tap.skip("the check catches an upward call and a circle in a sample tree", "cc or nm not found")
        return
    good = {
        "low.h": "/* Layer 1 of libsample. */\nint low(void);\n",
        "low.c": "/* Layer 1 of libsample. */\n#include \"low.h\"\nint low(void) { return 1; }\n",
        "mid.h": "/* Layer 2 of libsample. */\nint mid(void);\nint mid2(void);\n",
        "mid.c": "/* Layer 2 of libsample. */\n#include \"low.h\"\n#include \"mid.h\"\n"
                 "int mid(void) { return low(); }\n",
        "mid2.c": "/* Layer 2 of libsample. */\n#include \"mid.h\"\nint mid2(void) { return mid(); }\n",
        "top.c": "/* Layer 3 of libsample. */\n#include \"mid.h\"\nint top(void);\n"
                 "int top(void) { return mid2(); }\n",
    }
    bad = dict(good)
    # low calls up into mid (and so low, mid form a circle), mid calls mid2
    # and mid2 calls mid (a circle within layer 2); low includes mid.h
    bad["low.c"] = ("/* Layer 1 of libsample. */\n#include \"low.h\"\n#include \"mid.h\"\n"
                    "int low(void) { return 0; }\nint low_up(void);\nint low_up(void) { return mid(); }\n")
    bad["mid.c"] = ("/* Layer 2 of libsample. */\n#include \"low.h\"\n#include \"mid.h\"\n"
                    "int mid(void) { return low() + mid2(); }\n")
    bad["stray.h"] = "/* A header that names no layer. */\nint stray(void);\n"
    results = {}
    for label, tree in (("good", good), ("bad", bad)):
        with tempfile.TemporaryDirectory() as tmp:
            src, obj = os.path.join(tmp, "src"), os.path.join(tmp, "obj")
            os.makedirs(src)
            os.makedirs(obj)
            for name, text in tree.items():
                with open(os.path.join(src, name), "w") as fh:
                    fh.write(text)
            units = sorted(name for name in tree if name.endswith(".c"))
            subprocess.run(["cc", "-c"] + [os.path.join(src, name) for name in units], cwd=obj, check=True,
                           capture_output=True)
            for name in units:
                os.rename(os.path.join(obj, name[:-2] + ".o"), os.path.join(obj, name + ".o"))
            inner = Tap()
            import contextlib
            import io
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                passed = check(src, "libsample", [obj], None, None, inner)
            results[label] = (passed, out.getvalue())
    tap.ok(results["good"][0], "a sample tree in layers passes", results["good"][1].splitlines()
           if not results["good"][0] else ())
    text = results["bad"][1]
    tap.ok(not results["bad"][0] and "low.c (layer 1) calls mid.c (layer 2): mid" in text,
           "an upward call in the sample is caught", [] if "calls mid.c" in text else text.splitlines())
    tap.ok("circle: low.c mid.c mid2.c" in text, "a circle of calls in the sample is caught",
           [] if "circle:" in text else text.splitlines())
    tap.ok("low.c (layer 1) includes mid.h (layer 2)" in text, "an upward include in the sample is caught")
    tap.ok(re.search(r"^not ok \d+ - every file .*\n#   stray.h$", text, re.M) is not None,
           "a file without a layer line in the sample is caught")


def main():
    tap = Tap()
    if sys.argv[1:] == ["--self-test"]:
        self_test(tap)
        print("1..%d" % tap.n)
        return 0
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in LIBS:
        print(__doc__, file=sys.stderr)
        return 2
    root, lib = sys.argv[1], sys.argv[2]
    folder, libname, obj_glob, apart, public, confined = LIBS[lib]
    objs = "no build folder given"
    if len(sys.argv) == 4:
        found = glob.glob(os.path.join(sys.argv[3], obj_glob))
        if not shutil.which("nm"):
            objs = "nm (binutils) not found"
        elif not found:
            objs = "no objects of %s under %s (not built in this configuration)" % (libname, sys.argv[3])
        else:
            objs = found
    base = os.path.join(root, "base") if lib in ("xfer", "store") else None
    check(os.path.join(root, folder), libname, objs, apart, public, tap, base, confined)
    print("1..%d" % tap.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
