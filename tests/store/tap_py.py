"""What the store's Python TAP tests share: the skips every one of them
makes before it starts, and the runner that turns each test_* function
into one test point.

    from tap_py import Skip, needs, run
    torch, kvrt = needs("torch", "kvrt", "kvrt.store")
    ...
    run(globals())
"""
import importlib
import os
import sys
import traceback


class Skip(Exception):
    """Raised by a test point that cannot run here; the message says why."""


def needs(*modules):
    """The modules, imported; or the whole file skipped, saying why: under
    a sanitizer build (its runtime cannot load into this interpreter) or
    when one of them is missing."""
    sanitize = os.environ.get("KVRT_SANITIZE", "none")
    if sanitize != "none":
        print("1..0 # SKIP libkvrt is built with -fsanitize=%s, whose runtime cannot load into %s after start-up"
              % (sanitize, sys.executable))
        sys.exit(0)
    try:
        return [importlib.import_module(m) for m in modules]
    except ImportError as e:
        print("1..0 # SKIP %s" % str(e).replace("\n", " "))
        sys.exit(0)


def run(names):
    """Every test_* function of `names` (a module's globals()), in name
    order, as one TAP plan."""
    tests = [(name, fn) for name, fn in sorted(names.items()) if name.startswith("test_") and callable(fn)]
    print("1..%d" % len(tests))
    for i, (name, fn) in enumerate(tests, 1):
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        try:
            fn()
            print("ok %d - %s: %s" % (i, name, doc))
        except Skip as e:
            print("ok %d - %s # SKIP %s" % (i, name, e))
        except Exception:
            print("not ok %d - %s: %s" % (i, name, doc))
            for line in traceback.format_exc().rstrip().split("\n"):
                print("# " + line)
        sys.stdout.flush()
