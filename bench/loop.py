#!/usr/bin/python3
"""Run one kvrt operation on one layout in a loop, with the shapes of
bench/compare.py, for a profiler:

    perf record -e cpu-clock -g -- bench/loop.py decode LBHNC --iters 20
    perf report --no-children --sort dso,symbol
    valgrind --tool=callgrind bench/loop.py gather LBNHC --iters 1

Needs only the build and NumPy (no torch).  Prints GB/s per iteration (the
byte counts of `kvrt bench`).  --build DIR profiles another build, e.g. a
release one (meson setup build-release --buildtype=release).
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

OPS = ["write", "read", "copy_blocks", "gather", "scatter", "decode"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op", choices=OPS)
    ap.add_argument("layout")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    lib_path = os.path.join(a.build, "core", "libkvrt.so")
    if not os.path.exists(lib_path):
        sys.exit("loop: error: %s not found: run scripts/setup.sh first" % lib_path)
    try:
        import numpy as np
    except ImportError:
        sys.exit("loop: error: NumPy is missing: apt-get install -y --no-install-recommends python3-numpy")
    os.environ["KVRT_CPU_THREADS"] = str(a.threads)
    import kvrt_raw
    K = kvrt_raw.load(a.build)

    L, bs, H, D = 4, 16, 8, 128
    T, P, G, S, CTX, HQ = 4096, 256, 256, 16, 2048, 32
    nb_seq = CTX // bs
    blocks = max(T // bs, 2 * P, G, S * nb_seq)
    rng = np.random.default_rng(1)
    rt = K.Runtime()
    be = rt.bind("cpu", a.layout)
    cache = K.Cache(be, a.layout, L, blocks, bs, H, D)
    bits = rng.integers(0, 1 << 16, size=cache.size // 2, dtype=np.uint16)
    bits = (bits & np.uint16(0x807F)) | np.uint16(0x3C00)  # |x| in [2^-7, 2^-6): finite bf16
    cache.upload(bits)
    perm = rng.permutation(blocks)
    row = H * D * 2

    def buf(nbytes, fill=True):
        b = K.Buffer(be, nbytes)
        if fill:
            b.upload(((rng.integers(0, 1 << 16, size=nbytes // 2, dtype=np.uint16) & np.uint16(0x807F))
                      | np.uint16(0x3C00)))
        return b

    if a.op in ("write", "read"):
        slots = np.array([perm[t // bs] * bs + t % bs for t in range(T)], dtype=np.int64)
        kb, vb = buf(T * row), buf(T * row)
        fn = {"write": cache.write, "read": cache.read}[a.op]
        nbytes = L * T * 2 * row

        def run():
            for layer in range(L):
                K.check(fn(layer, slots, kb, vb), a.op)
    elif a.op == "copy_blocks":
        pairs = np.array([x for p in zip(perm[:P], perm[P:2 * P]) for x in p], dtype=np.int64)
        nbytes = P * cache.bytes_per_block

        def run():
            K.check(cache.copy_blocks(pairs), "copy_blocks")
    elif a.op in ("gather", "scatter"):
        ids = np.ascontiguousarray(perm[:G].astype(np.int64))
        st = buf(cache.staging_bytes(G))
        fn = {"gather": cache.gather, "scatter": cache.scatter}[a.op]
        nbytes = cache.staging_bytes(G)

        def run():
            K.check(fn(ids, st), a.op)
    else:
        tables = np.ascontiguousarray(perm[:S * nb_seq].astype(np.int32).reshape(S, nb_seq))
        lens = np.full(S, CTX, dtype=np.int32)
        qb, ob = buf(S * HQ * D * 2), buf(S * HQ * D * 2, fill=False)
        params = cache.decode_params(S, HQ, qb, ob, tables, nb_seq, lens, D ** -0.5)
        nbytes = S * CTX * 2 * row

        def run():
            K.check(cache.decode(0, params), "decode")
    run()
    for _ in range(a.iters):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        print("%s %s %.2f GB/s" % (a.op, a.layout, nbytes / dt / 1e9), flush=True)
    cache.destroy()
    rt.close()


if __name__ == "__main__":
    main()
