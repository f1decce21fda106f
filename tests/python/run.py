"""TAP runner for the Python package's tests: every test_* function of the
test_*.py modules next to this file is one test point.  Skips the whole
suite, with the reason, when this interpreter lacks torch or numpy."""
import importlib
import os
import sys
import time
import traceback

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)

sanitize = os.environ.get("KVRT_SANITIZE", "none")
if sanitize != "none":
    # A sanitizer runtime must be the first library of the process, and the
    # interpreter is not built with it; tests/dlpack covers the C side there.
    print("1..0 # SKIP libkvrt is built with -fsanitize=%s, whose runtime cannot load into %s after start-up"
          % (sanitize, sys.executable))
    sys.exit(0)

for module, package in (("torch", "python3-torch"), ("numpy", "python3-numpy")):
    try:
        importlib.import_module(module)
    except ImportError as e:
        print("1..0 # SKIP %s has no %s (install %s): %s" % (sys.executable, module, package, e))
        sys.exit(0)

import kvrt  # noqa: E402  (after the skip checks: the package itself must import)

names = sorted(f[:-3] for f in os.listdir(here) if f.startswith("test_") and f.endswith(".py"))
only = sys.argv[1:]
tests = []
for name in names:
    mod = importlib.import_module(name)
    for attr in sorted(vars(mod)):
        fn = getattr(mod, attr)
        full = "%s.%s" % (name, attr)
        if attr.startswith("test_") and callable(fn) and (not only or any(o in full for o in only)):
            tests.append((full, fn))

print("# kvrt %s from %s, libkvrt %s" % (kvrt.__version__, os.path.dirname(kvrt.__file__), kvrt.library_path))
print("1..%d" % len(tests))
for i, (name, fn) in enumerate(tests, 1):
    doc = (fn.__doc__ or "").strip().split("\n")[0]
    began = time.monotonic()
    try:
        fn()
        print("ok %d - %s%s" % (i, name, (": " + doc) if doc else ""))
        # How long each point took, to find the ones that hold the suite up.
        print("# %.1f s" % (time.monotonic() - began))
    except Exception as e:
        if type(e).__name__ == "Skip":
            print("ok %d - %s # SKIP %s" % (i, name, e))
            continue
        print("not ok %d - %s%s" % (i, name, (": " + doc) if doc else ""))
        for line in traceback.format_exc().rstrip().split("\n"):
            print("# " + line)
    sys.stdout.flush()
