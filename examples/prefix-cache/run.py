#!/usr/bin/python3
"""Prefix caching across engines with kvrt.Store, checked token for token.

    PYTHONPATH=build/python /usr/bin/python3 examples/prefix-cache/run.py [options]

1. An engine at PP 2 x TP 2 (four processes: two pipeline stages of two
   layers, each at TP 2; HND, 16-token blocks) serves prompts that share a
   long system prompt, every rank putting its heads of its layers into the
   store (on disk, or through the shared tier), and exits.
2. A new engine at PP 1, TP 1 (NHD, 32-token blocks) serves the same
   prompts: it loads the stored prefix, every layer, instead of computing
   it.
3. So does one at PP 4 (four stages of one layer; BLHNC, 8-token blocks):
   each stage loads its own layer.
4. And one at TP 4 (LHBNC, 8-token blocks): with 2 KV heads each is held by
   two ranks (libkvrt's replication rule), and each rank loads its head.
The store cuts entries into layer groups of one layer (layers_per_entry,
--layers-per-entry), so that every stage of every engine finds its own.
Every engine's tokens must equal those of the same model run in one process
with plain torch attention and no kvrt at all; the hit rates and the
prefill times with and without the store (each prompt is also served once
cold on a scratch sequence) are measured, not estimated.

--tier disk: the store is a folder; shared: each engine has its own empty
folder and a redis-server started here carries the entries between them;
both: one run each.  Exit status 0 only when every token is identical.
"""
import argparse
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The model and its reference are the disaggregated example's.
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "disagg"))

NEAR_TIE = 1e-4
PHASES = [  # what, PP, TP, layout, block size
    ("writer", 2, 2, "HND", 16),
    ("reader", 1, 1, "NHD", 32),
    ("reader", 4, 1, "BLHNC", 8),
    ("reader", 1, 4, "LHBNC", 8),
]


def blocks_for(tokens, block_size):
    return (tokens + block_size - 1) // block_size


def rank_main(args, phase, pp, tp, me, layout, block_size, store_path, shared, prompts, result_q, init):
    stage, rank = divmod(me, tp)
    try:
        import torch
        import torch.distributed as dist
        import kvrt
        from engine import Engine, store_model
        from model import Config, TinyLM

        torch.set_num_threads(1)
        tp_group = None
        if pp * tp > 1:
            dist.init_process_group("gloo", init_method=init, rank=me, world_size=pp * tp)
            # every rank makes every stage's group, in order; keeps its own
            for s in range(pp):
                g = dist.new_group(list(range(s * tp, (s + 1) * tp)))
                tp_group = g if s == stage else tp_group
        cfg = Config()
        model = TinyLM(cfg, args.seed)
        per_prompt = blocks_for(max(len(p) for p in prompts) + args.new_tokens, block_size)
        # two sequences per prompt: one with the store, one cold (scratch)
        blocks = 2 * per_prompt * len(prompts) + 1
        with kvrt.Runtime() as rt, kvrt.Store(store_path, model=store_model(cfg), model_id="tiny-lm@%d" % args.seed,
                                              chunk_tokens=args.chunk, shared=shared,
                                              layers_per_entry=args.layers_per_entry) as store:
            eng = Engine(rt, store, cfg, model, layout, block_size, blocks, tp, rank, pp, stage, tp_group)
            report = {"tokens": [], "cold": [], "loaded": [], "seconds": 0.0, "cold_seconds": 0.0,
                      "layout": eng.cache.layout, "heads": eng.heads, "layers": eng.layers}
            ids = list(range(blocks))[::-1]  # blocks handed out from the top, as an allocator might
            for i, prompt in enumerate(prompts):
                mine = ids[2 * i * per_prompt:(2 * i + 1) * per_prompt]
                scratch = ids[(2 * i + 1) * per_prompt:(2 * i + 2) * per_prompt]
                if phase == "reader":
                    cold, _, cs = eng.serve(prompt, scratch, args.new_tokens, use_store=False)
                    report["cold"].append(cold)
                    report["cold_seconds"] += cs
                out, loaded, s = eng.serve(prompt, mine, args.new_tokens, use_store=True)
                report["tokens"].append(out)
                report["loaded"].append(loaded)
                report["seconds"] += s
            store.flush()
            st = store.stats
            report["stats"] = {k: st[k] for k in ("hits_memory", "hits_disk", "hits_shared", "misses",
                                                  "put_entries", "put_present", "written_disk", "written_shared")}
        result_q.put(("ok", me, report))
        if pp * tp > 1:
            dist.destroy_process_group()
    except Exception:
        result_q.put(("error", me, traceback.format_exc()))


def run_phase(args, phase, pp, tp, layout, block_size, store_path, shared, prompts, tmp, index):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = "file://" + os.path.join(tmp, "pg-%d" % index)
    procs = [ctx.Process(target=rank_main, args=(args, phase, pp, tp, r, layout, block_size, store_path, shared,
                                                  prompts, q, init)) for r in range(pp * tp)]
    for p in procs:
        p.start()
    results, errors = {}, []
    while len(results) + len(errors) < pp * tp and not errors:
        kind, rank, data = q.get(timeout=600)
        if kind == "error":
            errors.append((rank, data))
        else:
            results[rank] = data
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    if errors:
        for rank, tb in errors:
            print("rank %d of the PP %d x TP %d engine failed:\n%s" % (rank, pp, tp, tb), file=sys.stderr)
        return None
    return results


def start_redis(tmp):
    server = shutil.which("redis-server")
    if not server:
        return None, "redis-server is not installed (Debian package redis-server)"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = os.path.join(tmp, "redis")
    os.mkdir(d)
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--dir", d, "--save", "",
                             "--appendonly", "no", "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, "redis://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    return None, "redis-server did not start"


def report(index, phase, pp, tp, bs, res, prompts, refs):
    """Print an engine's figures and tokens; whether they are right."""
    r0 = res[0]
    total = sum(len(p) for p in prompts)
    loaded = sum(r0["loaded"])
    hits = {k: sum(r["stats"][k] for r in res.values()) for k in r0["stats"]}
    heads = r0["heads"]["num_heads"]
    line = "engine %d: PP %d x TP %d, layout %s, %d-token blocks, %d layer%s and %d KV head%s a rank: " % (
        index + 1, pp, tp, r0["layout"], bs, r0["layers"][1], "" if r0["layers"][1] == 1 else "s", heads,
        "" if heads == 1 else "s")
    line += "loaded %d of %d prompt tokens (hit rate %.0f%%; entries from memory %d, disk %d, shared %d)" % (
        loaded, total, 100.0 * loaded / total, hits["hits_memory"], hits["hits_disk"], hits["hits_shared"])
    ok = all(r["tokens"] == refs for r in res.values())
    if phase == "writer":
        # the first prompt is computed whole; the later ones load the system
        # prompt this engine put a moment before
        print(line + "; prefill %.3f s; put %d entries" % (r0["seconds"], hits["put_entries"]))
    else:
        saved = r0["cold_seconds"] - r0["seconds"]
        print(line + "; prefill %.3f s with the store, %.3f s without: %.3f s saved (%.0f%%)" % (
            r0["seconds"], r0["cold_seconds"], saved, 100.0 * saved / r0["cold_seconds"] if r0["cold_seconds"] else 0))
        ok = ok and all(r["cold"] == refs for r in res.values())
        if r0["loaded"][0] == 0:
            print("  the first prompt loaded nothing that engine 1 stored")
            ok = False
    for i, prompt in enumerate(prompts):
        mark = "==" if all(r["tokens"][i] == refs[i] for r in res.values()) else "!="
        print("  prompt %d (%d tokens, %d loaded): %s %s reference" % (i, len(prompt), r0["loaded"][i],
                                                                      r0["tokens"][i], mark))
        if mark == "!=":
            print("    reference: %s" % refs[i])
    return ok


def run_tier(args, tier, prompts, refs):
    tmp = tempfile.mkdtemp(prefix="kvrt-prefix-cache-")
    redis, shared = None, None
    try:
        if tier == "shared":
            redis, shared = start_redis(tmp)
            if not redis:
                print("== shared tier: skipped: %s" % shared)
                return None
        print("== the store %s" % ("in one folder on disk" if tier == "disk" else
                                   "on %s; every engine with its own empty folder" % shared))
        ok = True
        for index, (phase, pp, tp, layout, bs) in enumerate(PHASES):
            path = os.path.join(tmp, "store" if tier == "disk" else "store-%d" % index)
            res = run_phase(args, phase, pp, tp, layout, bs, path, shared, prompts, tmp, index)
            if res is None:
                return False
            ok = report(index, phase, pp, tp, bs, res, prompts, refs) and ok
        return ok
    finally:
        if redis:
            redis.kill()
            redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", choices=["disk", "shared", "both"], default="both")
    ap.add_argument("--prompts", type=int, default=4, help="prompts sharing the system prompt (default 4)")
    ap.add_argument("--prefix", type=int, default=384, help="tokens of the shared system prompt (default 384)")
    ap.add_argument("--new-tokens", type=int, default=8, help="tokens generated per prompt (default 8)")
    ap.add_argument("--chunk", type=int, default=64, help="the store's chunk_tokens (default 64)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the weights and prompts")
    ap.add_argument("--layers-per-entry", type=int, default=1,
                    help="the store's layers_per_entry (default 1: every stage of PP 1, 2 and 4 reads its own)")
    args = ap.parse_args()
    if args.prompts < 1 or args.new_tokens < 1 or args.prefix < 1 or args.chunk < 1 or args.layers_per_entry < 0:
        ap.error("--prompts, --prefix, --new-tokens and --chunk must be at least 1, --layers-per-entry at least 0")

    import torch
    from model import Config, TinyLM, generate_reference

    cfg = Config()
    model = TinyLM(cfg, args.seed)
    g = torch.Generator().manual_seed(args.seed * 7919)
    system = [int(t) for t in torch.randint(0, cfg.vocab, (args.prefix,), generator=g)]
    prompts, refs, draw = [], [], 0
    while len(prompts) < args.prompts:
        draw += 1
        g = torch.Generator().manual_seed(args.seed * 1000 + draw)
        n = 20 + (draw * 37) % 90
        prompt = system + [int(t) for t in torch.randint(0, cfg.vocab, (n,), generator=g)]
        ref, margin = generate_reference(model, prompt, args.new_tokens)
        if margin < NEAR_TIE:
            print("a prompt's reference has a near-tie (top-2 logit margin %.2g < %g); drawn again"
                  % (margin, NEAR_TIE))
            continue
        prompts.append(prompt)
        refs.append(ref)
    print("model: %d layers, hidden %d, %d query heads, %d KV heads of %d, fp32, seed %d; %d prompts of %d-%d "
          "tokens sharing a %d-token system prompt; chunks of %d tokens, %d layer%s per entry" % (
              cfg.layers, cfg.hidden, cfg.q_heads, cfg.kv_heads, cfg.head_size, args.seed, len(prompts),
              min(map(len, prompts)), max(map(len, prompts)), args.prefix, args.chunk, args.layers_per_entry,
              "" if args.layers_per_entry == 1 else "s"))
    ok = True
    for tier in ["disk", "shared"] if args.tier == "both" else [args.tier]:
        ok = run_tier(args, tier, prompts, refs) is not False and ok
    print("tokens identical: %s" % ("yes" if ok else "no"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
