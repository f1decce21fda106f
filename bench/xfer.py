#!/usr/bin/env python3
"""kvrt xfer next to memcpy, in one run.

    bench/xfer.py [--kvrt build/tools/kvrt] [--repeat N] [--transport sm|tcp ...]

Moves 64 MiB of KV blocks between two processes (`kvrt xfer serve` and
`kvrt xfer send`, CPU caches, 32 layers x 8 KV heads x head size 128, bf16,
block size 16: 2 MiB per block, 32 blocks) under each transport:

  same layout   LBHNC -> LBHNC (method regions: one RMA per planned region)
  converting    LBHNC -> LBNHC (the method kvrt picks; staging by default)

and measures libc memcpy of 256 MiB in the same run (`kvrt bench`'s
roofline).  Each transfer is repeated --repeat times in one session after a
warm-up, and the receiver verifies every byte.  Prints a Markdown table
(GB/s = 10^9 bytes/s, ratio to memcpy, RMA operations per transfer).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MODEL = ["--layers", "32", "--kv-heads", "8", "--head-size", "128", "--dtype", "bf16", "--block-size", "16",
         "--blocks", "32"]
TRANSPORTS = {
    "sm": {"UCX_TLS": "sm,tcp", "UCX_NET_DEVICES": "lo"},
    "tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"},
}


def memcpy_gbps(kvrt, env):
    out = subprocess.run([kvrt, "bench", "--json", "--backend", "cpu", "--op", "gather", "--layout", "LBHNC",
                          "--layers", "1", "--repeat", "3"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["memcpy_gbps"]


def transfer(kvrt, env, src, dst, repeat, tmp):
    port_file = os.path.join(tmp, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    serve = subprocess.Popen([kvrt, "xfer", "serve", "--listen", "127.0.0.1:0", "--port-file", port_file,
                              "--json", "--sessions", "2", "--layout", dst, "--timeout", "120"] + MODEL,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file) and time.monotonic() < deadline and serve.poll() is None:
        time.sleep(0.05)
    port = open(port_file).read().strip()
    runs = []
    for n in (1, repeat):  # warm-up session, then the measured one
        r = subprocess.run([kvrt, "xfer", "send", "--connect", "127.0.0.1:" + port, "--json", "--layout", src,
                            "--repeat", str(n), "--timeout", "120"] + MODEL, env=env, capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            serve.kill()
            sys.exit("bench: send %s -> %s failed: %s" % (src, dst, r.stderr.strip()))
        runs.append(json.loads(r.stdout))
    out, err = serve.communicate(timeout=300)
    doc = json.loads(out)
    if not doc["verified"]:
        sys.exit("bench: the receiver did not verify: %s %s" % (doc, err))
    return runs[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvrt", default="build/tools/kvrt")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--transport", action="append", choices=sorted(TRANSPORTS))
    a = ap.parse_args()
    base = dict(os.environ)
    base.pop("VLLM_KV_CACHE_LAYOUT", None)
    base["KVRT_BACKEND"] = "cpu"
    base.setdefault("UCX_LOG_LEVEL", "error")
    rows = []
    load0 = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    with tempfile.TemporaryDirectory(prefix="kvrt-xfer-bench-") as tmp:
        for name in a.transport or ["sm", "tcp"]:
            env = dict(base, **TRANSPORTS[name])
            mc = memcpy_gbps(a.kvrt, env)
            for what, src, dst in (("same layout", "LBHNC", "LBHNC"), ("converting", "LBHNC", "LBNHC")):
                d = transfer(a.kvrt, env, src, dst, a.repeat, tmp)
                per = d["bytes"] / d["transfers"]
                rows.append((name, env["UCX_TLS"], what, "%s -> %s" % (src, dst), d["method"], per, d["gbps"], mc,
                             d["rma_ops"]))
                print("# %s %s: %.3f GB/s (memcpy %.3f GB/s)" % (name, what, d["gbps"], mc), file=sys.stderr)
    load1 = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    print("Load average (1 min) %s at the start, %s at the end; %d CPUs." % (load0, load1, os.cpu_count() or 0))
    print()
    print("| transport (UCX_TLS) | transfer | layouts | method | MiB per transfer | GB/s | memcpy GB/s | ratio | "
          "RMA ops per transfer |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for name, tls, what, pair, method, per, gbps, mc, ops in rows:
        print("| %s (`%s`) | %s | %s | %s | %.0f | %.2f | %.2f | %.2fx | %d |"
              % (name, tls, what, pair, method, per / 2**20, gbps, mc, gbps / mc if mc else 0, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
