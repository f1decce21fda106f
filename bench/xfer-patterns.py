#!/usr/bin/env python3
"""The blocks engines send, moved by libkvrt-xfer next to UCX's own ceiling
and memcpy, in one run.

    bench/xfer-patterns.py [--build DIR] [--rounds N] [--transport sm|tcp ...] [--size BYTES]

Per transport (as bench/xfer.py: sm is UCX_TLS=sm,tcp, tcp is UCX_TLS=tcp,
both on loopback) and in interleaved rounds:

  ucx_perftest  the best of ucp_put_bw, ucp_am_bw and tag_bw of one --size
                message: UCX's ceiling on this transport at this moment
  patterns      bench-xfer (bench/xfer-agents.c) with the pattern's options:
                --size bytes per transfer, one transfer in flight, 32 layers,
                bf16, 16-token blocks; every byte checked at the destination;
                memcpy of the same bytes timed in the same process

The patterns: whole blocks with the same ids on both sides; scattered ids
(the transfer's blocks drawn at random from caches four times larger) with
2, 8 and 64 KiB pages; the layout pairs LBHNC -> LBHNC, LBHNC -> LBNHC,
LBHNC -> BLHNC and BLNHC -> LBHNC with 8 KiB pages; a tensor-parallel slice
(2 of 8 heads); push and pull; a token range between 16- and 64-token
blocks (HND -> NHD and back, the sequence's blocks scattered).  Prints a Markdown table: the data messages
of one transfer (kvrt_xfer_plan), the median GB/s over the rounds (10^9 B/s)
and its ratio to UCX's best, to memcpy of the same bytes in one piece, and
to the same pages copied one by one in one process ("page copy": what this
machine's memory gives the pattern's scattered pages, before any transfer).
"""
import argparse
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_xfer", os.path.join(HERE, "xfer.py"))
bench_xfer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_xfer)

# Page sizes: one layer of one 16-token block, K and V, bf16.
PAGES = {
    "2 KiB": ["--heads", "1", "--head-size", "32"],
    "8 KiB": ["--heads", "2", "--head-size", "64"],
    "64 KiB": ["--heads", "8", "--head-size", "128"],
}
SCATTER = 4  # caches hold this many times the blocks a transfer moves


def patterns(size):
    def blocks(page):
        per_block = {"2 KiB": 64 << 10, "8 KiB": 256 << 10, "64 KiB": 2 << 20}[page]
        return size // per_block

    def scattered(page):
        return PAGES[page] + ["--cache-blocks", str(SCATTER * blocks(page))]

    rows = [("whole blocks, same ids, 64 KiB pages", "LBHNC", "LBHNC", "push", PAGES["64 KiB"])]
    for page in PAGES:
        rows.append(("scattered, %s pages" % page, "LBHNC", "LBHNC", "push", scattered(page)))
    for src, dst in (("LBHNC", "LBNHC"), ("LBHNC", "BLHNC"), ("BLNHC", "LBHNC")):
        rows.append(("scattered, 8 KiB pages", src, dst, "push", scattered("8 KiB")))
    rows.append(("TP slice: heads 2-3 of 8, 64 KiB pages", "LBHNC", "LBHNC", "push",
                 PAGES["64 KiB"] + ["--src-heads", "2", "--head-start", "2"]))
    for src, dst in (("LBHNC", "LBHNC"), ("LBHNC", "LBNHC")):
        rows.append(("scattered, 8 KiB pages", src, dst, "pull", scattered("8 KiB")))
    # Engines of different block sizes: one sequence's token range between
    # two block tables (8 KiB pages on the 16-token side).
    for direction in ("push", "pull"):
        rows.append(("token range, 16-token blocks -> 64", "LBHNC", "LBNHC", direction,
                     scattered("8 KiB") + ["--block-sizes", "16:64"]))
    rows.append(("token range, 64-token blocks -> 16", "LBNHC", "LBHNC", "push",
                 scattered("8 KiB") + ["--block-sizes", "64:16"]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transport", action="append", choices=sorted(bench_xfer.TRANSPORTS))
    ap.add_argument("--size", type=int, default=64 << 20)
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "bench-xfer")
    if not os.access(exe, os.X_OK):
        sys.exit("bench: %s is missing: build first (meson compile -C %s)" % (exe, args.build))
    transports = args.transport or ["sm", "tcp"]
    rows = patterns(args.size)
    start_load = bench_xfer.load()
    ucx = {t: [] for t in transports}
    got = {(t, i): [] for t in transports for i in range(len(rows))}
    docs = {}
    for _ in range(args.rounds):
        for t in transports:
            env = dict(os.environ, **bench_xfer.TRANSPORTS[t])
            best = [bench_xfer.perftest(test, args.size, env) for test in bench_xfer.PERFTESTS]
            ucx[t].append(max([b for b in best if b is not None] or [0.0]))
            for i, (_, src, dst, direction, extra) in enumerate(rows):
                doc = bench_xfer.kvrt_run(exe, ["--size", str(args.size), "--repeat", "3", "--src", src, "--dst", dst,
                                                "--pull", "1" if direction == "pull" else "0"] + extra, env)
                got[(t, i)].append((doc["gbps"], doc["memcpy_gbps"], doc["page_copy_gbps"]))
                docs[(t, i)] = doc
    print("Load average (1 min) %s at the start, %s at the end; %d CPUs; %d rounds, %d MiB per transfer."
          % (start_load, bench_xfer.load(), os.cpu_count(), args.rounds, args.size >> 20))
    print()
    print("| transport | pattern | layouts | direction | method | messages | GB/s | x UCX best | x memcpy "
          "| page copy GB/s | x page copy |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for t in transports:
        u = statistics.median(ucx[t])
        print("| %s | ucx_perftest, best of %s | | | | 1 | %.2f | 1.00 | | | |" % (t, ", ".join(bench_xfer.PERFTESTS), u))
        for i, (name, src, dst, direction, _) in enumerate(rows):
            g = statistics.median(x[0] for x in got[(t, i)])
            m = statistics.median(x[0] / x[1] for x in got[(t, i)])
            pc = statistics.median(x[2] for x in got[(t, i)])
            pr = statistics.median(x[0] / x[2] for x in got[(t, i)])
            d = docs[(t, i)]
            print("| %s | %s | %s -> %s | %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f |"
                  % (t, name, src, dst, direction, d["method"], d["messages"], g, g / u if u else 0.0, m, pc, pr))


if __name__ == "__main__":
    main()
