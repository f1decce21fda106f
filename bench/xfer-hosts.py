#!/usr/bin/env python3
"""Transfers between two hosts made on this machine, next to ucx_perftest
over the same link, in one run.

    bench/xfer-hosts.py [--build DIR] [--rounds N] [--size BYTES]

Two network namespaces joined by a veth pair, shaped as tests/xfer/
netns_hosts.py shapes them (netem 50 us each way and 10 Gbit/s where the
kernel has netem, else a tbf rate of 10 Gbit/s alone); everything over tcp
on the veth (UCX_TLS=tcp, UCX_NET_DEVICES the veth).  Per round:

  ucx_perftest  server in namespace b, client in a: ucp_put_bw, ucp_am_bw
                and tag_bw of one --size message; the best is UCX's ceiling
  UCP path      bench-ucp-paths (bench/ucp-paths.c) with its receiver moved
                into namespace b: kvrt's own data path in plain UCP,
                rendezvous active messages in 2 MiB pieces with peer error
                handling and UCX_TCP_PUT_ENABLE=n, as kvrt runs them
  kvrt          `kvrt xfer serve` in b, `kvrt xfer send` in a (a shared key:
                a listener off loopback needs one), caches of 32 layers x
                2 KV heads x 64, bf16, 16-token blocks (8 KiB pages):
                whole blocks, scattered ids from a cache four times larger,
                and scattered and converting (LBHNC -> LBNHC); --size bytes
                per transfer, 4 transfers, their GB/s as `kvrt xfer send`
                reports it; the server checks every byte

Needs root and iproute2.  Prints a Markdown table of medians over the
rounds and the ratio to UCX's best.
"""
import argparse
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hosts = load("netns_hosts", os.path.join(HERE, "..", "tests", "xfer", "netns_hosts.py"))
bench_xfer = load("bench_xfer", os.path.join(HERE, "xfer.py"))


PAGE_BLOCK = 32 * 2 * 16 * 2 * 64 * 2  # bytes of one block: 32 layers of 8 KiB pages


def perftest(h, test, size):
    return bench_xfer.perftest(test, size, h.env("a"), host=h.addr["b"], server_prefix=h.exec_prefix("b"),
                               client_prefix=h.exec_prefix("a"), server_env=h.env("b"))


def ucp_path(h, build, size):
    env = h.env("a")
    env["UCX_TCP_PUT_ENABLE"] = "n"
    r = subprocess.run(h.exec_prefix("a") + [os.path.join(build, "bench", "bench-ucp-paths"), "--path", "am-rndv",
                                             "--peer-mode", "--msg", str(2 << 20), "--size", str(size),
                                             "--child-netns", "/var/run/netns/" + h.ns["b"], "--child-devices",
                                             h.dev["b"]], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit("bench: bench-ucp-paths across the namespaces failed: %s" % r.stderr.strip()[-300:])
    doc = json.loads(r.stdout)
    if not doc["verified"]:
        sys.exit("bench: bench-ucp-paths: the receiver's buffer did not verify")
    return doc["median_gbps"]


def ids_text(ids):
    return ",".join(str(i) for i in ids)


def kvrt_pattern(h, kvrt, tmp, key, blocks, cache_blocks, src, dst):
    model = ["--layers", "32", "--kv-heads", "2", "--head-size", "64", "--dtype", "bf16", "--block-size", "16",
             "--blocks", str(cache_blocks)]
    rng = random.Random(blocks * 7 + cache_blocks)
    local = rng.sample(range(cache_blocks), blocks) if cache_blocks > blocks else list(range(blocks))
    remote = rng.sample(range(cache_blocks), blocks) if cache_blocks > blocks else list(range(blocks))
    s = hosts.Serve(h, kvrt, tmp, ["--layout", dst] + model)
    if s.port is None:
        sys.exit("bench: kvrt xfer serve did not start: %s" % s.finish(5)[3])
    rc, doc, out, err = hosts.send(h, kvrt, s.port, ["--layout", src, "--ids", ids_text(local), "--remote-ids",
                                                      ids_text(remote), "--repeat", "4"] + model, timeout=300)
    src_rc, sdoc, _, serr = s.finish()
    if rc != 0 or src_rc != 0 or not sdoc or sdoc.get("verified") is not True:
        sys.exit("bench: kvrt %s -> %s failed: %s %s" % (src, dst, err.strip()[-300:], serr.strip()[-300:]))
    return doc["gbps"], doc.get("messages", 0), doc.get("method", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=64 << 20)
    args = ap.parse_args()
    kvrt = os.path.join(args.build, "tools", "kvrt")
    if os.geteuid() != 0:
        sys.exit("bench: network namespaces need root")
    blocks = args.size // PAGE_BLOCK
    patterns = [("whole blocks, same ids", blocks, blocks, "LBHNC", "LBHNC"),
                ("scattered, 8 KiB pages", blocks, 4 * blocks, "LBHNC", "LBHNC"),
                ("scattered, 8 KiB pages, converting", blocks, 4 * blocks, "LBHNC", "LBNHC")]
    h = hosts.Hosts()
    h.setup()
    try:
        with tempfile.TemporaryDirectory(prefix="kvrt-hosts-") as tmp:
            key = os.path.join(tmp, "key")
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, os.urandom(32))
            os.close(fd)
            hosts.KEY.extend(["--key-file", key])
            ucx, path, got = [], [], {p[0]: [] for p in patterns}
            plan = {}
            for _ in range(args.rounds):
                best = [perftest(h, t, args.size) for t in bench_xfer.PERFTESTS]
                ucx.append(max([b for b in best if b is not None] or [0.0]))
                path.append(ucp_path(h, args.build, args.size))
                for name, n, cache, src, dst in patterns:
                    g, msgs, method = kvrt_pattern(h, kvrt, tmp, key, n, cache, src, dst)
                    got[name].append(g)
                    plan[name] = (msgs, method)
    finally:
        h.teardown()
    u = statistics.median(ucx)
    print("Link: veth between two namespaces, %s; tcp; %d rounds, %d MiB per transfer."
          % (h.shaped or "unshaped", args.rounds, args.size >> 20))
    print()
    print("| what | layouts | method | messages per transfer | GB/s | x UCX best |")
    print("|---|---|---|---:|---:|---:|")
    print("| ucx_perftest, best of %s | | | 1 | %.2f | 1.00 |" % (", ".join(bench_xfer.PERFTESTS), u))
    p = statistics.median(path)
    print("| UCP path: am-rndv, peer error handling, 2 MiB pieces | | | %d | %.2f | %.2f |"
          % (args.size // (2 << 20), p, p / u if u else 0.0))
    for name, n, cache, src, dst in patterns:
        g = statistics.median(got[name])
        print("| kvrt: %s | %s -> %s | %s | %d | %.2f | %.2f |" % (name, src, dst, plan[name][1], plan[name][0], g,
                                                               g / u if u else 0.0))


if __name__ == "__main__":
    main()
