#!/usr/bin/env python3
"""Decode per CPU kernel (KVRT_CPU_ISA) and layout, against the read roofline.

Runs `kvrt bench --json --op decode` for every kernel the machine runs, both
standard shapes (16 sequences x 2048 tokens, and 1 sequence x 32768 split
over the context), bf16 and fp16, every layout; --rounds times, the kernels
interleaved within each round, so a stretch of load on a shared machine hits
every kernel alike.  Each `kvrt bench` run times a streaming read (and a
memcpy) with the same threads after every repetition; a cell reports the
best decode GB/s over the rounds against the best read GB/s sampled next to
it, and the median over the rounds of the per-run ratio.

    bench/isa_table.py [--rounds N] [--repeat N] [--threads N] [--kvrt PATH]

Prints a markdown table (the one in BENCHMARKS.md).  Not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = ["BLHNC", "LBHNC", "BLNHC", "LBNHC", "BHLNC", "LHBNC"]
SHAPES = [("16x2048", 16, 2048, 0.5), ("1x32768", 1, 32768, 0.4)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", action="append", help="kernels (default: avx512, avx2, generic)")
    ap.add_argument("--dtype", action="append", help="element types (default: bf16, fp16)")
    ap.add_argument("--kvrt", default=os.path.join(ROOT, "build", "tools", "kvrt"))
    a = ap.parse_args()
    isas = a.isa or ["avx512", "avx2", "generic"]
    dtypes = a.dtype or ["bf16", "fp16"]
    runs = {}  # (isa, shape, dtype, layout) -> [(gbps, read_gbps, ratio)]
    skipped = {}
    for rnd in range(a.rounds):
        for shape, seqs, ctx, _ in SHAPES:
            for dt in dtypes:
                for isa in isas:
                    cmd = [a.kvrt, "bench", "--json", "--backend", "cpu", "--op", "decode", "--dtype", dt,
                           "--seqs", str(seqs), "--context", str(ctx), "--threads", str(a.threads),
                           "--repeat", str(a.repeat)]
                    for lay in LAYOUTS:
                        cmd += ["--layout", lay]
                    env = dict(os.environ, KVRT_CPU_ISA=isa)
                    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       universal_newlines=True, env=env)
                    if r.returncode != 0:
                        skipped[isa] = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
                        continue
                    for res in json.loads(r.stdout)["results"]:
                        if res["skipped"]:
                            continue
                        runs.setdefault((isa, shape, dt, res["layout"]), []).append(
                            (res["gbps"], res["read_gbps"], res["ratio"]))
                    print("round %d %s %s %s done" % (rnd + 1, shape, dt, isa), file=sys.stderr)
    print("| kernel | shape | dtype | " + " | ".join(LAYOUTS) + " |")
    print("|---|---|---|" + "---:|" * len(LAYOUTS))
    for isa in isas:
        if isa in skipped and not any(k[0] == isa for k in runs):
            print("| %s | — | — | %s |" % (isa, "skipped: " + skipped[isa]) + " |" * (len(LAYOUTS) - 1))
            continue
        for shape, _, _, target in SHAPES:
            for dt in dtypes:
                cells = []
                for lay in LAYOUTS:
                    v = runs.get((isa, shape, dt, lay))
                    if not v:
                        cells.append("—")
                        continue
                    g = max(x[0] for x in v)
                    rd = max(x[1] for x in v)
                    med = statistics.median(x[2] for x in v)
                    cells.append("%.2f GB/s, %.2f× (med %.2f)%s" % (g, g / rd, med, "" if g / rd >= target else " ❌"))
                print("| %s | %s | %s | %s |" % (isa, shape, dt, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
