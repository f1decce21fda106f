#!/usr/bin/env python3
"""kvrt's transfers next to UCX's own ceiling and memcpy, in one run.

    bench/xfer.py [--build DIR] [--rounds N] [--transport sm|tcp ...] [--size BYTES]

For each transport (sm: UCX_TLS=sm,tcp with UCX_CMA_MEMORY_INVALIDATE=y;
tcp: UCX_TLS=tcp; both on loopback) and in interleaved rounds, so that a
change of load on a shared machine hits every row alike:

  ucx_perftest   ucp_put_bw, ucp_am_bw and tag_bw of one --size message
                 (server and client processes, a free port picked per run)
  UCP paths      bench-ucp-paths (bench/ucp-paths.c): puts into memory the
                 target allocated, puts into UCP_MEM_MAP_ALLOCATE memory,
                 rendezvous active messages into the destination, with and
                 without peer error handling and in 2 MiB pieces; each run
                 also times memcpy of the same bytes in the same process
  kvrt           bench-xfer (bench/xfer-agents.c): libkvrt-xfer's own API
                 between two processes, CPU caches of 32 layers x 8 KV heads
                 x 128, bf16, 16-token blocks (2 MiB per block); --size
                 bytes per round as 1, 4 and 16 transfers in flight, same
                 layout (LBHNC -> LBHNC) and converting (LBHNC -> LBNHC);
                 and small transfers (one block of one sequence, all 32
                 layers) one at a time and 16 in flight: transfers per
                 second and latency p50/p99

Every program checks every byte it moved.  "x memcpy" divides by memcpy of
the same bytes timed in the same process (bench-ucp-paths and bench-xfer
time it after each transfer), the median of the rounds.  Prints a Markdown table: the median over the rounds in
GB/s (10^9 bytes/s; ucx_perftest's MB/s are 2^20 bytes/s and converted),
the ratio to the best of ucx_perftest on the same transport and to memcpy.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

TRANSPORTS = {
    "sm": {"UCX_TLS": "sm,tcp", "UCX_NET_DEVICES": "lo", "UCX_CMA_MEMORY_INVALIDATE": "y"},
    "tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"},
}
PERFTESTS = ["ucp_put_bw", "ucp_am_bw", "tag_bw"]
PATHS = [
    ("put-malloc", []),
    ("put-alloc", []),
    ("am-rndv", []),
    ("am-rndv", ["--peer-mode"]),
    ("am-rndv", ["--peer-mode", "--msg", str(2 << 20)]),
]
BLOCK_BYTES = 2 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perftest(test, size, env, host="127.0.0.1", server_prefix=(), client_prefix=(), server_env=None):
    """One ucx_perftest run; GB/s, or None when it failed three times.  The
    prefixes and server_env put the two sides elsewhere (other network
    namespaces: bench/xfer-hosts.py)."""
    for _ in range(3):
        port = str(free_port())
        server = subprocess.Popen(list(server_prefix) + ["ucx_perftest", "-p", port], env=server_env or env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        try:
            r = subprocess.run(list(client_prefix) + ["ucx_perftest", host, "-p", port, "-t", test, "-s", str(size),
                                                      "-n", "10", "-w", "2", "-f", "-v"],
                               env=env, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            r = None
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if r is None or r.returncode != 0:
            continue
        # -v: CSV, the last line: iterations, latency typical/avg/overall,
        # bandwidth avg/overall (MB/s = 2^20 B/s), message rate avg/overall.
        rows = [line.split(",") for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
        if rows:
            return float(rows[-1][5]) * 2**20 / 1e9
    return None


def ucp_path(exe, path, extra, size, env):
    r = subprocess.run([exe, "--path", path, "--size", str(size), "--repeat", "5"] + extra, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("bench: bench-ucp-paths %s %s failed: %s" % (path, " ".join(extra), r.stderr.strip()))
    doc = json.loads(r.stdout)
    if not doc["verified"]:
        sys.exit("bench: bench-ucp-paths %s did not verify" % path)
    return doc


def kvrt_run(exe, args, env):
    r = subprocess.run([exe] + args, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("bench: bench-xfer %s failed: %s" % (" ".join(args), r.stderr.strip()))
    doc = json.loads(r.stdout)
    if not doc["verified"]:
        sys.exit("bench: bench-xfer %s: the receiver's cache did not verify" % " ".join(args))
    return doc


def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=64 << 20)
    ap.add_argument("--small", type=int, default=400, help="small transfers per run (default 400)")
    ap.add_argument("--transport", action="append", choices=sorted(TRANSPORTS))
    a = ap.parse_args()
    if a.size % BLOCK_BYTES:
        sys.exit("bench: --size must be a multiple of %d (one block)" % BLOCK_BYTES)
    kvrt = os.path.join(a.build, "bench", "bench-xfer")
    paths_exe = os.path.join(a.build, "bench", "bench-ucp-paths")
    for exe in (kvrt, paths_exe):
        if not os.access(exe, os.X_OK):
            sys.exit("bench: %s is missing: build kvrt with UCX first (scripts/setup.sh)" % exe)
    base = dict(os.environ)
    base.pop("VLLM_KV_CACHE_LAYOUT", None)
    base["KVRT_BACKEND"] = "cpu"
    base.setdefault("UCX_LOG_LEVEL", "error")
    load0 = load()
    table, small = [], {}
    for name in a.transport or ["sm", "tcp"]:
        env = dict(base, **TRANSPORTS[name])
        series = {}

        def add(key, value):
            series.setdefault(key, []).append(value)

        for rnd in range(a.rounds):
            for t in PERFTESTS:
                v = perftest(t, a.size, env)
                if v is not None:
                    add(("ucx_perftest", t), v)
            for path, extra in PATHS:
                d = ucp_path(paths_exe, path, extra, a.size, env)
                add(("UCP path", " ".join([path] + extra)), d["gbps"])
                add(("memcpy", "memcpy"), d["memcpy_gbps"])
            for what, src, dst in (("same layout", "LBHNC", "LBHNC"), ("converting", "LBHNC", "LBNHC")):
                for n in (1, 4, 16):
                    d = kvrt_run(kvrt, ["--size", str(a.size), "--src", src, "--dst", dst, "--inflight", str(n),
                                        "--repeat", "3"], env)
                    key = "%s %s -> %s (%s), %d in flight" % (what, src, dst, d["method"], n)
                    add(("kvrt", key), d["gbps"])
                    add(("kvrt memcpy", key), d["memcpy_gbps"])
                    add(("registration", "ms"), d["registration_ms"])
            for window in (1, 16):
                d = kvrt_run(kvrt, ["--size", str(16 * BLOCK_BYTES), "--small", str(a.small), "--window",
                                    str(window)], env)
                small.setdefault((name, env["UCX_TLS"], window), []).append(d)
            print("# %s: round %d of %d done (load %s)" % (name, rnd + 1, a.rounds, load()), file=sys.stderr)
        best_ucx = max([statistics.median(v) for k, v in series.items() if k[0] == "ucx_perftest"] or [0])
        mc = statistics.median(series.get(("memcpy", "memcpy"), [0]))
        for (kind, what), v in series.items():
            if kind in ("registration", "kvrt memcpy"):
                continue
            med = statistics.median(v)
            # kvrt's rows: the memcpy its own process timed after each round.
            own = series.get(("kvrt memcpy", what))
            table.append((name, env["UCX_TLS"], kind, what, med, min(v), max(v), best_ucx,
                          statistics.median(own) if own else mc))
        reg = series.get(("registration", "ms"), [0])
        print("# %s: registration of the cache and the staging pool (%.0f MiB) took %.3f ms (median of %d)"
              % (name, (a.size + (16 << 20)) / 2**20, statistics.median(reg), len(reg)), file=sys.stderr)
    print("Load average (1 min) %s at the start, %s at the end; %d CPUs; %d rounds, %d MiB per transfer."
          % (load0, load(), os.cpu_count() or 0, a.rounds, a.size >> 20))
    print()
    print("| transport (UCX_TLS) | what | path | GB/s (median) | min..max | x UCX best | x memcpy |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, tls, kind, what, med, lo, hi, best, mc in table:
        print("| %s (`%s`) | %s | %s | %.2f | %.2f..%.2f | %.2f | %.2f |"
              % (name, tls, kind, what, med, lo, hi, med / best if best else 0, med / mc if mc else 0))
    print()
    print("Small transfers: one block of one sequence (all 32 layers, %d KiB) each; %d per run; medians over "
          "the rounds." % (BLOCK_BYTES >> 10, a.small))
    print()
    print("| transport (UCX_TLS) | in flight | method | transfers/s | p50 latency (us) | p99 latency (us) | GB/s |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for (name, tls, window), docs in small.items():
        med = {k: statistics.median(d[k] for d in docs) for k in ("per_second", "p50_us", "p99_us", "gbps")}
        print("| %s (`%s`) | %d | %s | %.0f | %.0f | %.0f | %.2f |"
              % (name, tls, window, docs[0]["method"], med["per_second"], med["p50_us"], med["p99_us"], med["gbps"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
