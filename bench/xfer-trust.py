#!/usr/bin/env python3
"""What authentication costs a transfer: keyed against keyless, in one run.

    bench/xfer-trust.py [--build DIR] [--rounds N] [--transport sm|tcp ...] [--size BYTES]

bench-xfer (bench/xfer-agents.c) runs each pattern twice per round, once
with no key and once with a pre-shared key (KVRT_XFER_KEY_FILE, a fresh
32-byte file of mode 600): the keyed run signs and checks the metadata and
carries and checks the session token on every message.  Keyless and keyed
alternate, round after round, and which of them goes first alternates too,
so a change of load on a shared machine hits both alike.  The table gives
the median of the rounds and the ratio keyed / keyless (1.00: no cost), the
median of each round's pair.  bench-xfer checks every byte it moved and each
run reports whether its agents were in fact keyed (the blob is signed), so a
key that did not take effect cannot pass as "no cost".

Patterns: same layout (LBHNC -> LBHNC) and converting (LBHNC -> LBNHC),
1 and 4 transfers in flight; small transfers (one 2 MiB block at a time,
transfers per second).  The last lines give the cost of the refusing
handlers on every active-message id (UCX 1.13 crashes on an id without
one): the time their registration took and the memory they hold, once per
agent.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TRANSPORTS = {
    "sm": {"UCX_TLS": "sm,tcp", "UCX_NET_DEVICES": "lo", "UCX_CMA_MEMORY_INVALIDATE": "y"},
    "tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"},
}
PATTERNS = [
    ("same layout, 1 in flight", ["--src", "LBHNC", "--dst", "LBHNC", "--inflight", "1"], "gbps"),
    ("same layout, 4 in flight", ["--src", "LBHNC", "--dst", "LBHNC", "--inflight", "4"], "gbps"),
    ("converting, 1 in flight", ["--src", "LBHNC", "--dst", "LBNHC", "--inflight", "1"], "gbps"),
    ("converting, 4 in flight", ["--src", "LBHNC", "--dst", "LBNHC", "--inflight", "4"], "gbps"),
    ("small transfers, 1 at a time", ["--small", "200", "--window", "1"], "per_second"),
]


def run(exe, args, env):
    r = subprocess.run([exe] + args, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("bench-xfer %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not out["verified"]:
        sys.exit("bench-xfer %s: %d bytes differ" % (" ".join(args), out["mismatched_bytes"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--transport", action="append", choices=sorted(TRANSPORTS))
    ap.add_argument("--size", type=int, default=64 << 20)
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench-xfer")
    if not os.access(exe, os.X_OK):
        sys.exit("%s not found: build with the ucx feature (meson setup %s)" % (exe, a.build))
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32))
        os.close(fd)
        rows, handlers = [], {}
        for tname in a.transport or ["sm", "tcp"]:
            base = {k: v for k, v in os.environ.items() if k != "KVRT_XFER_KEY_FILE"}
            base.update(TRANSPORTS[tname])
            envs = {False: base, True: dict(base, KVRT_XFER_KEY_FILE=key)}
            for label, args, field in PATTERNS:
                args = args + ["--size", str(a.size), "--repeat", "3"]
                got = {False: [], True: []}
                for rnd in range(a.rounds):
                    # Whichever runs second may find the machine warmer
                    # or busier: the order alternates.
                    for keyed in ((False, True) if rnd % 2 == 0 else (True, False)):
                        out = run(exe, args, envs[keyed])
                        if out["keyed"] != keyed:
                            sys.exit("bench-xfer: the agents were %skeyed where %skeyed was asked" %
                                     ("" if out["keyed"] else "not ", "" if keyed else "not "))
                        got[keyed].append(out[field])
                        handlers.setdefault(tname, []).append((out["handlers_ms"], out["handler_bytes"]))
                plain, signed = statistics.median(got[False]), statistics.median(got[True])
                # The ratio of each round's pair, so a round that was slow
                # for both counts as one, not twice.
                ratio = statistics.median(k / p for p, k in zip(got[False], got[True]) if p)
                rows.append((tname, label, field, plain, signed, ratio))
    unit = {"gbps": "GB/s", "per_second": "transfers/s"}
    print("| transport | pattern | keyless | keyed | keyed / keyless (median of the rounds' pairs) |")
    print("|---|---|---|---|---|")
    for tname, label, field, plain, signed, ratio in rows:
        print("| %s | %s | %.2f %s | %.2f %s | %.3f |" % (tname, label, plain, unit[field], signed, unit[field], ratio))
    print()
    for tname, h in handlers.items():
        ms = statistics.median(x[0] for x in h)
        print("refusing handlers (%s): %.2f ms to register, %.2f MiB held, once per agent (median of %d agents)" %
              (tname, ms, h[0][1] / 2**20, len(h)))
    print("%d rounds, median; %d bytes per bandwidth run; every byte verified" % (a.rounds, a.size))


if __name__ == "__main__":
    main()
