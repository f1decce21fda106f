#!/usr/bin/env python3
"""libkvrt-xfer in layers: no include arrow runs back up.

Every source and header of xfer/ says which layer it is in ("Layer N of
libkvrt-xfer" in its opening comment; docs/xfer.md, "Layers", draws them).
This test reads those lines and every #include "..." of xfer/, and fails
on a file without a layer, on an include of a higher layer, and on a .c
file whose layer differs from its own header's.  It also holds that UCX is
called from one file only (transport.c) and that only the transport
includes UCX's headers.

usage: layers.py SOURCE_ROOT        (TAP on stdout)
"""
import os
import re
import sys


def main():
    root = os.path.join(sys.argv[1], "xfer")
    files = sorted(f for f in os.listdir(root) if f.endswith((".c", ".h")))
    layer, includes, texts = {}, {}, {}
    for f in files:
        text = open(os.path.join(root, f)).read()
        texts[f] = text
        m = re.search(r"Layer (\d+) of libkvrt-xfer", text.split("*/", 1)[0])
        if m:
            layer[f] = int(m.group(1))
        includes[f] = re.findall(r'^#include "([^"]+)"', text, re.M)
    n, failed = 0, 0

    def ok(cond, what, diag=()):
        nonlocal n, failed
        n += 1
        print(("ok" if cond else "not ok") + " %d - %s" % (n, what))
        for d in diag:
            print("#   " + d)
        failed += not cond

    missing = [f for f in files if f not in layer]
    ok(not missing, "every file of xfer/ names its layer (%d files)" % len(files), missing)
    up = ["%s (layer %d) includes %s (layer %d)" % (f, layer[f], h, layer[h])
          for f in files if f in layer for h in includes[f] if h in layer and layer[h] > layer[f]]
    ok(not up, "no include runs back up (%d arrows)" % sum(len(v) for v in includes.values()), up)
    unknown = ["%s includes %s" % (f, h) for f in files for h in includes[f] if h not in layer]
    ok(not unknown, "every local include is a header of xfer/", unknown)
    own = ["%s is layer %d, %s layer %d" % (f, layer[f], f[:-2] + ".h", layer[f[:-2] + ".h"])
           for f in files if f.endswith(".c") and f[:-2] + ".h" in layer and f in layer
           and layer[f] != layer[f[:-2] + ".h"]]
    ok(not own, "a source is in its header's layer", own)
    ucx = [f for f in files if f != "transport.c" and re.search(r"\bucp_\w+\s*\(", texts[f])]
    ok(not ucx, "every UCP call is in transport.c", ucx)
    hdr = [f for f in files if f != "transport.c" and re.search(r"#include <uc[pst]/", texts[f])]
    ok(not hdr, "only the transport includes UCX's headers", hdr)
    levels = sorted(set(layer.values()))
    print("# layers: " + "; ".join("%d: %s" % (lv, " ".join(f for f in files if layer.get(f) == lv))
                                   for lv in levels))
    print("1..%d" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
