#!/usr/bin/python3
"""Disaggregated prefill -> decode over kvrt, checked token for token.

    PYTHONPATH=build/python /usr/bin/python3 examples/disagg/run.py [options]

One decode process and one prefill process (or two tensor-parallel prefill
ranks, each holding half of the KV heads) run a small transformer
(model.py).  Prefill holds its kvrt cache in one layout, writes each prompt's
K/V with cache.write, attends over them through the cache's DLPack views and
pushes the sequence's blocks to the decode process with kvrt.xfer, a
notification telling it the first token.  Decode holds its cache in another
layout, and on each notification continues the sequence with cache.write and
cache.decode.  The generated tokens must equal those of the same model run
in one process with plain torch attention and no kvrt at all.

UCX picks the transport from UCX_TLS; --transport sets it for the children
(tcp: UCX_TLS=tcp over loopback; sm: shared memory, UCX_TLS=sm,tcp, tcp only
for the connection handshake).  Exit status 0 only when every sequence is
identical.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TRANSPORTS = {
    "tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"},
    "sm": {"UCX_TLS": "sm,tcp", "UCX_NET_DEVICES": "lo"},
}
NEAR_TIE = 1e-4


def blocks_for(tokens, block_size):
    return (tokens + block_size - 1) // block_size


def plan_requests(cfg, prompts, new_tokens):
    """Block ids of each request on both sides: different ids, in a
    different order, so a transfer that ignored the mapping shows."""
    bs = cfg.block_size
    reqs, next_p, next_d = [], 0, 0
    for i, prompt in enumerate(prompts):
        n_p = blocks_for(len(prompt), bs)
        n_d = blocks_for(len(prompt) + new_tokens, bs)
        pre = list(range(next_p, next_p + n_p))[::-1]
        dec = list(range(next_d + 1, next_d + 1 + n_d))
        next_p += n_p
        next_d += n_d + 1
        reqs.append({"id": i, "prompt": prompt, "prefill_blocks": pre, "decode_blocks": dec})
    return reqs, next_p, next_d + 1


def prefill_main(args, rank, tp, port, reqs, pblocks, result_q, pipe, assign_q):
    try:
        import torch
        import kvrt
        import kvrt.xfer as kx
        from engine import PrefillEngine
        from model import Config, TinyLM

        torch.set_num_threads(1)
        cfg = Config()
        model = TinyLM(cfg, args.seed)

        def exchange(out):  # all-gather of the ranks' attention heads
            pipe.send(out)
            other = pipe.recv()
            return torch.cat([out, other] if rank == 0 else [other, out], dim=1)

        with kvrt.Runtime() as rt:
            eng = PrefillEngine(rt, cfg, model, args.prefill_layout, pblocks, backend=args.prefill_backend,
                                tp_rank=rank, tp_size=tp, exchange=exchange)
            agent = kx.Agent(eng.cache, key_file=args.key_file)
            peer = agent.connect("127.0.0.1", port)
            heads = eng.kv_heads
            posted, plans = [], []
            for r in reqs:
                first = eng.prefill(r["prompt"], r["prefill_blocks"])
                note = json.dumps({"id": r["id"], "rank": rank, "first": first,
                                   "prompt_len": len(r["prompt"])}).encode()
                # The decode side chose the request's blocks and granted
                # them to this rank before it said which they are.
                rid, decode_blocks = assign_q.get(timeout=60)
                if rid != r["id"] or len(decode_blocks) != len(r["prefill_blocks"]):
                    raise RuntimeError("prefill: assignment %r for request %d" % ((rid, decode_blocks), r["id"]))
                # Asynchronous: the next prompt runs while this one moves.
                posted.append(agent.post(peer, r["prefill_blocks"], decode_blocks,
                                         heads=(0, rank * heads, heads), notification=note))
                for q in posted:
                    q.test()
            for q in posted:
                q.wait()
                plans.append(q.plan)
                q.release()
            result_q.put(("prefill", rank, {
                "tokens": eng.tokens, "seconds": eng.seconds, "layout": eng.cache.layout,
                "backend": eng.cache.backend, "kv_heads": heads,
                "blocks": sum(len(r["prefill_blocks"]) for r in reqs),
                "bytes": sum(p["bytes"] for p in plans), "methods": sorted({p["method"] for p in plans}),
                "transfer_seconds": sum(p["seconds"] for p in plans)}))
            peer.close()
            agent.close()
    except Exception:
        result_q.put(("error", "prefill rank %d" % rank, traceback.format_exc()))


def decode_main(args, tp, reqs, dblocks, port_q, result_q, assign_qs):
    try:
        import torch
        import kvrt
        import kvrt.xfer as kx
        from engine import DecodeEngine
        from model import Config, TinyLM

        torch.set_num_threads(1)
        cfg = Config()
        model = TinyLM(cfg, args.seed)
        with kvrt.Runtime() as rt:
            eng = DecodeEngine(rt, cfg, model, args.decode_layout, dblocks, backend=args.decode_backend)
            # Only peers holding the key connect, and they write only the
            # blocks granted to them (docs/security.md).
            agent = kx.Agent(eng.cache, key_file=args.key_file, require_grants=True)
            port_q.put(agent.listen("127.0.0.1", 0))
            peers = []
            while len(peers) < tp:
                p = agent.accept(timeout=60)
                if p is None:
                    raise RuntimeError("decode: no prefill rank connected within 60 s")
                peers.append(p)
            # Each request's blocks, granted to the prefill ranks (each
            # writes its heads of them) before the ranks learn their ids.
            for r in reqs:
                blocks = r["decode_blocks"][:len(r["prefill_blocks"])]
                for p in peers:
                    p.expect(blocks)
                for q in assign_qs:
                    q.put((r["id"], blocks))
            arrived, done, out = {}, set(), {}
            deadline = time.monotonic() + 120
            while len(done) < len(reqs):
                if time.monotonic() > deadline:
                    raise RuntimeError("decode: requests %s never arrived" % sorted(set(range(len(reqs))) - done))
                agent.progress()
                for _peer, msg in agent.notifications():
                    n = json.loads(msg)
                    arrived.setdefault(n["id"], []).append(n)
                for rid, notes in list(arrived.items()):
                    if len(notes) < tp or rid in done:
                        continue
                    if len({n["first"] for n in notes}) != 1:
                        raise RuntimeError("decode: ranks disagree on request %d's first token" % rid)
                    r = reqs[rid]
                    # Arrived: no peer may write this sequence's blocks again.
                    for p in peers:
                        p.revoke(r["decode_blocks"][:len(r["prefill_blocks"])], read=False)
                    out[rid] = eng.generate(notes[0]["first"], notes[0]["prompt_len"], r["decode_blocks"],
                                            args.new_tokens)
                    done.add(rid)
            st = agent.stats
            result_q.put(("decode", 0, {
                "tokens": out, "generated": eng.tokens, "seconds": eng.seconds, "layout": eng.cache.layout,
                "backend": eng.cache.backend, "bytes_received": st["bytes_received"], "denied": st["denied"]}))
            # Stay until the prefill ranks said goodbye.
            t0 = time.monotonic()
            while any(p.state[0] == "connected" for p in peers) and time.monotonic() - t0 < 10:
                agent.progress()
            agent.close()
    except Exception:
        result_q.put(("error", "decode", traceback.format_exc()))


def run_mode(args, tp, prompts, refs):
    from model import Config
    cfg = Config()
    reqs, pblocks, dblocks = plan_requests(cfg, prompts, args.new_tokens)
    ctx = mp.get_context("spawn")
    port_q, result_q = ctx.Queue(), ctx.Queue()
    assign_qs = [ctx.Queue() for _ in range(tp)]
    dec = ctx.Process(target=decode_main, args=(args, tp, reqs, dblocks, port_q, result_q, assign_qs))
    dec.start()
    port = port_q.get(timeout=120)
    pipes = ctx.Pipe() if tp == 2 else (None, None)
    pre = [ctx.Process(target=prefill_main,
                       args=(args, r, tp, port, reqs, pblocks, result_q, pipes[r], assign_qs[r]))
           for r in range(tp)]
    for p in pre:
        p.start()
    results, errors = {}, []
    while len(results) + len(errors) < tp + 1:
        kind, who, data = result_q.get(timeout=300)
        if kind == "error":
            errors.append((who, data))
            break
        results[(kind, who)] = data
    for p in pre + [dec]:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    if errors:
        for who, tb in errors:
            print("%s failed:\n%s" % (who, tb), file=sys.stderr)
        return False
    d = results[("decode", 0)]
    pf = [results[("prefill", r)] for r in range(tp)]
    same = all(d["tokens"][i] == refs[i] for i in range(len(prompts))) and d["denied"] == 0
    name = "tensor-parallel prefill (%d ranks)" % tp if tp > 1 else "prefill"
    print("== %s -> decode over %s (UCX_TLS=%s)" % (name, args.transport, os.environ.get("UCX_TLS")))
    for r, s in enumerate(pf):
        print("prefill%s: layout %s, backend %s, %d KV head%s: %d prompt tokens, %.0f tokens/s; pushed %d blocks, "
              "%d bytes (%s), %.1f ms post to completion" % (
                  " rank %d" % r if tp > 1 else "", s["layout"], s["backend"], s["kv_heads"],
                  "" if s["kv_heads"] == 1 else "s", s["tokens"], s["tokens"] / s["seconds"], s["blocks"],
                  s["bytes"], "/".join(s["methods"]), s["transfer_seconds"] * 1e3))
    print("decode:  layout %s, backend %s: %d tokens generated, %.0f tokens/s; received %d bytes, "
          "%d pushes outside the grants" % (
              d["layout"], d["backend"], d["generated"], d["generated"] / d["seconds"] if d["seconds"] else 0,
              d["bytes_received"], d["denied"]))
    for i, prompt in enumerate(prompts):
        mark = "==" if d["tokens"][i] == refs[i] else "!="
        print("  prompt %d (%d tokens): %s %s reference" % (i, len(prompt), d["tokens"][i], mark))
        if d["tokens"][i] != refs[i]:
            print("    reference: %s" % refs[i])
    print("tokens identical: %s" % ("yes" if same else "no"))
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["single", "tp", "both"], default="both",
                    help="one prefill process, two tensor-parallel prefill ranks, or both runs (default)")
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="tcp")
    ap.add_argument("--prompts", type=int, default=3, help="number of prompts (default 3)")
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens generated per prompt (default 16)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the weights and prompts")
    ap.add_argument("--prefill-layout", default="HND")
    ap.add_argument("--decode-layout", default="BLNHC")
    ap.add_argument("--prefill-backend", default="cpu")
    ap.add_argument("--decode-backend", default="cpu")
    ap.add_argument("--key-file", help="pre-shared key of both sides (default: a fresh one, mode 600, for this run)")
    args = ap.parse_args()
    if args.prompts < 1 or args.new_tokens < 1:
        ap.error("--prompts and --new-tokens must be at least 1")
    os.environ.update(TRANSPORTS[args.transport])
    if args.key_file is None:
        import tempfile
        keys = tempfile.TemporaryDirectory(prefix="kvrt-disagg-")
        args.key_file = os.path.join(keys.name, "key")
        fd = os.open(args.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32))
        os.close(fd)

    import torch
    from model import Config, TinyLM, generate_reference

    cfg = Config()
    model = TinyLM(cfg, args.seed)
    lengths = [37, 5, 64, 100, 17, 48]
    prompts, refs, draw = [], [], args.seed * 1000
    while len(prompts) < args.prompts:
        n = lengths[len(prompts) % len(lengths)]
        draw += 1
        g = torch.Generator().manual_seed(draw)
        prompt = [int(t) for t in torch.randint(0, cfg.vocab, (n,), generator=g)]
        ref, margin = generate_reference(model, prompt, args.new_tokens)
        if margin < NEAR_TIE:
            print("prompt %d: the reference has a near-tie (top-2 logit margin %.2g < %g); drawn again" % (
                len(prompts), margin, NEAR_TIE))
            continue
        prompts.append(prompt)
        refs.append(ref)
    print("model: %d layers, hidden %d, %d query heads, %d KV heads of %d, vocabulary %d, fp32, seed %d" % (
        cfg.layers, cfg.hidden, cfg.q_heads, cfg.kv_heads, cfg.head_size, cfg.vocab, args.seed))
    ok = True
    for tp in {"single": [1], "tp": [2], "both": [1, 2]}[args.mode]:
        ok = run_mode(args, tp, prompts, refs) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
