"""TAP: examples/prefix-cache/run.py on small sizes, once with the store
on disk and once through the shared tier; each point passes only when every
engine's tokens equal the plain torch reference and the new engines loaded
the prefix the first one stored.  Skips, saying why, where it cannot run.

    prefix_cache.py EXAMPLE_DIR
"""
import importlib
import os
import subprocess
import sys

example = sys.argv[1]
sanitize = os.environ.get("KVRT_SANITIZE", "none")
if sanitize != "none":
    print("1..0 # SKIP libkvrt is built with -fsanitize=%s, whose runtime cannot load into %s after start-up"
          % (sanitize, sys.executable))
    sys.exit(0)
for module in ("torch", "kvrt.store"):
    try:
        importlib.import_module(module)
    except ImportError as e:
        print("1..0 # SKIP %s: %s" % (sys.executable, str(e).replace("\n", " ")))
        sys.exit(0)

tiers = [("disk", "the store on disk"), ("shared", "the shared tier (a redis-server of its own)")]
print("1..%d" % len(tiers))
for i, (tier, what) in enumerate(tiers, 1):
    cmd = [sys.executable, os.path.join(example, "run.py"), "--tier", tier, "--prompts", "2", "--prefix", "192",
           "--new-tokens", "4"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = "timed out after 500 s: %s" % e, -1
    skipped = "shared tier: skipped:" in text
    ok = rc == 0 and "tokens identical: yes" in text and "loaded nothing" not in text
    if skipped:
        reason = text.split("shared tier: skipped:", 1)[1].split("\n", 1)[0].strip()
        print("ok %d - %s # SKIP %s" % (i, what, reason))
    else:
        print("%s %d - %s: PP 2 x TP 2 writes, PP 1, PP 4 and TP 4 load the prefix, tokens identical to the "
              "reference"
              % ("ok" if ok else "not ok", i, what))
    for line in text.rstrip().split("\n"):
        print("# " + line)
    sys.stdout.flush()
