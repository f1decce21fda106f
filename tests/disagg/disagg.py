"""TAP: examples/disagg/run.py on small sizes over one UCX transport; one
point per mode (prefill -> decode; two tensor-parallel prefill ranks ->
decode; the same between 16- and 64-token blocks; one prefill rank -> four
decode ranks over two KV heads), each passing only when the generated tokens equal the plain torch
reference.  Skips, saying why, where the example cannot run here.

    disagg.py EXAMPLE_DIR TRANSPORT
"""
import importlib
import os
import subprocess
import sys

example, transport = sys.argv[1], sys.argv[2]
sanitize = os.environ.get("KVRT_SANITIZE", "none")
if sanitize != "none":
    print("1..0 # SKIP libkvrt is built with -fsanitize=%s, whose runtime cannot load into %s after start-up"
          % (sanitize, sys.executable))
    sys.exit(0)
try:
    importlib.import_module("torch")
except ImportError as e:
    print("1..0 # SKIP %s has no torch (install python3-torch): %s" % (sys.executable, e))
    sys.exit(0)
try:
    importlib.import_module("kvrt.xfer")
except ImportError as e:
    print("1..0 # SKIP %s" % str(e).replace("\n", " "))
    sys.exit(0)

modes = [("single", "prefill -> decode"), ("tp", "two tensor-parallel prefill ranks -> decode"),
         ("blocks", "prefill at TP 2 with 16-token HND blocks -> decode at TP 1 with 64-token NHD blocks"),
         ("replicated", "prefill at TP 1 -> decode at TP 4 over 2 KV heads (replicated)")]
print("1..%d" % len(modes))
for i, (mode, what) in enumerate(modes, 1):
    cmd = [sys.executable, os.path.join(example, "run.py"), "--mode", mode, "--transport", transport,
           "--prompts", "2", "--new-tokens", "8"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = "timed out after 240 s: %s" % e, -1
    ok = (rc == 0 and "tokens identical: yes" in text and "tokens identical: no" not in text
          and " 0 pushes outside the grants" in text)
    print("%s %d - %s over %s, keyed, writing only granted blocks: tokens identical to the reference"
          % ("ok" if ok else "not ok", i, what, transport))
    for line in text.rstrip().split("\n"):
        print("# " + line)
    sys.stdout.flush()
