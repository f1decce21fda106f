#!/usr/bin/python3
"""Disaggregated prefill -> decode over kvrt, checked token for token.

    PYTHONPATH=build/python /usr/bin/python3 examples/disagg/run.py [options]

Prefill and decode run in separate processes (one per tensor-parallel rank)
on a small transformer (model.py).  Prefill ranks hold their kvrt cache in
one layout and block size, write each prompt's K/V with cache.write, attend
over them through the cache's DLPack views and push the sequence's KV heads
to the decode ranks that hold them (kvrt.xfer.tp_map), a notification
telling them the first token.  Decode ranks hold their cache in another
layout, block size and head share, and on each notification continue the
sequence with cache.write and cache.decode.  The generated tokens must equal
those of the same model run in one process with plain torch attention and
no kvrt at all.

The modes (--mode, default all):
  single      prefill -> decode, 16-token blocks on both sides
  tp          prefill at TP 2 -> decode at TP 1, 16-token blocks
  blocks      prefill at TP 2 (HND, 16-token blocks) -> decode at TP 1 (NHD,
              64-token blocks): token ranges between the two block tables
  replicated  prefill at TP 1 -> decode at TP 4 with 2 KV heads: each
              decode rank holds one head, held by two ranks
  both        single and tp;  all: every mode

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

# Each mode: the prefill and decode groups' sizes, block sizes and (None:
# the --prefill-layout / --decode-layout given) layouts.
MODES = {
    "single": {"ptp": 1, "dtp": 1, "pbs": 16, "dbs": 16, "play": None, "dlay": None},
    "tp": {"ptp": 2, "dtp": 1, "pbs": 16, "dbs": 16, "play": None, "dlay": None},
    "blocks": {"ptp": 2, "dtp": 1, "pbs": 16, "dbs": 64, "play": "HND", "dlay": "NHD"},
    "replicated": {"ptp": 1, "dtp": 4, "pbs": 16, "dbs": 16, "play": None, "dlay": None},
}
GROUPS = {"both": ["single", "tp"], "all": ["single", "tp", "blocks", "replicated"]}


def blocks_for(tokens, block_size):
    return (tokens + block_size - 1) // block_size


def plan_requests(prompts, new_tokens, pbs, dbs):
    """Block tables of each request on both sides: different ids, in a
    different order, so a transfer that ignored the mapping shows."""
    reqs, next_p, next_d = [], 0, 0
    for i, prompt in enumerate(prompts):
        n_p = blocks_for(len(prompt), pbs)
        n_d = blocks_for(len(prompt) + new_tokens, dbs)
        pre = list(range(next_p, next_p + n_p))[::-1]
        dec = list(range(next_d + 1, next_d + 1 + n_d))
        next_p += n_p
        next_d += n_d + 1
        reqs.append({"id": i, "prompt": prompt, "prefill_blocks": pre, "decode_blocks": dec,
                     "decode_prompt_blocks": dec[:blocks_for(len(prompt), dbs)]})
    return reqs, next_p, next_d + 1


def mesh(ctx, n):
    """Pipes between every two of n ranks: mesh[r] maps each other rank to
    rank r's end."""
    ends = [dict() for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            x, y = ctx.Pipe()
            ends[a][b], ends[b][a] = x, y
    return ends


def all_gather(rank, ends):
    """The attention outputs of every rank's query heads, in rank order.

    Tensors go as plain bytes: torch's pickling would pass shared memory
    through a socket the sending process serves, which is gone when that
    rank finishes first.  Pairs exchange in order (the lower rank sends
    first), so no two ranks wait on each other's full pipe."""
    def exchange(out):
        import torch
        out = out.detach().contiguous()
        payload = (tuple(out.shape), out.view(torch.uint8).numpy().tobytes())
        parts = {rank: out}
        for other in sorted(ends):
            c = ends[other]
            if rank < other:
                c.send(payload)
            shape, data = c.recv()
            if rank > other:
                c.send(payload)
            parts[other] = torch.frombuffer(bytearray(data), dtype=out.dtype).reshape(shape)
        return torch.cat([parts[r] for r in sorted(parts)], dim=1)
    return exchange


def push_map(cfg, m, rank):
    """What prefill rank `rank` sends: libkvrt's push view of the head map
    (decode_rank, local_head_start, remote_head_start, num_heads)."""
    import kvrt.xfer as kx
    return kx.tp_map(cfg.kv_heads, m["ptp"], rank, m["dtp"], direction="push")


def prefill_main(args, m, rank, ports, reqs, pblocks, result_q, ends, assign_q):
    try:
        import torch
        import kvrt
        import kvrt.xfer as kx
        from engine import PrefillEngine
        from model import Config, TinyLM

        torch.set_num_threads(1)
        cfg = Config()
        model = TinyLM(cfg, args.seed)
        with kvrt.Runtime() as rt:
            eng = PrefillEngine(rt, cfg, model, m["play"], pblocks, m["pbs"], backend=args.prefill_backend,
                                tp_rank=rank, tp_size=m["ptp"], exchange=all_gather(rank, ends))
            agent = kx.Agent(eng.cache, key_file=args.key_file)
            peers = [agent.connect("127.0.0.1", port) for port in ports]
            runs = push_map(cfg, m, rank)
            by_tokens = m["pbs"] != m["dbs"]
            posted, plans = [], []
            assigned = {}
            for r in reqs:
                first = eng.prefill(r["prompt"], r["prefill_blocks"])
                note = json.dumps({"id": r["id"], "rank": rank, "first": first,
                                   "prompt_len": len(r["prompt"])}).encode()
                # Every decode rank chose the request's blocks and granted
                # them to this rank before it said which they are.
                while len(assigned.get(r["id"], {})) < m["dtp"]:
                    rid, d, blocks = assign_q.get(timeout=60)
                    assigned.setdefault(rid, {})[d] = blocks
                dec = assigned.pop(r["id"])
                for d, lh, rh, n in runs:
                    if by_tokens:
                        # Two block tables and the prompt's tokens.
                        kw = {"tokens": (0, len(r["prompt"]))}
                    elif len(dec[d]) != len(r["prefill_blocks"]):
                        raise RuntimeError("prefill: assignment %r for request %d" % (dec[d], r["id"]))
                    else:
                        kw = {}
                    # Asynchronous: the next prompt runs while this one moves.
                    posted.append(agent.post(peers[d], r["prefill_blocks"], dec[d], heads=(lh, rh, n),
                                             notification=note, **kw))
                for q in posted:
                    q.test()
            for q in posted:
                q.wait()
                plans.append(q.plan)
                q.release()
            result_q.put(("prefill", rank, {
                "tokens": eng.tokens, "seconds": eng.seconds, "layout": eng.cache.layout,
                "backend": eng.cache.backend, "kv_heads": eng.kv_heads, "block_size": m["pbs"],
                "runs": runs, "blocks": sum(len(r["prefill_blocks"]) for r in reqs),
                "bytes": sum(p["bytes"] for p in plans), "methods": sorted({p["method"] for p in plans}),
                "transfer_seconds": sum(p["seconds"] for p in plans)}))
            for p in peers:
                p.close()
            agent.close()
    except Exception:
        result_q.put(("error", "prefill rank %d" % rank, traceback.format_exc()))


def decode_main(args, m, rank, reqs, dblocks, port_q, result_q, assign_qs, ends):
    try:
        import torch
        import kvrt
        import kvrt.xfer as kx
        from engine import DecodeEngine
        from model import Config, TinyLM

        torch.set_num_threads(1)
        cfg = Config()
        model = TinyLM(cfg, args.seed)
        # The transfers that reach this rank for each request, one
        # notification each.
        expected = sum(1 for p in range(m["ptp"]) for d, _, _, _ in push_map(cfg, m, p) if d == rank)
        with kvrt.Runtime() as rt:
            eng = DecodeEngine(rt, cfg, model, m["dlay"], dblocks, m["dbs"], backend=args.decode_backend,
                               tp_rank=rank, tp_size=m["dtp"], exchange=all_gather(rank, ends))
            # Only peers holding the key connect, and they write only the
            # blocks granted to them (docs/security.md).
            agent = kx.Agent(eng.cache, key_file=args.key_file, require_grants=True)
            port_q.put((rank, agent.listen("127.0.0.1", 0)))
            peers = []
            while len(peers) < m["ptp"]:
                p = agent.accept(timeout=60)
                if p is None:
                    raise RuntimeError("decode rank %d: no prefill rank connected within 60 s" % rank)
                peers.append(p)
            # Each request's blocks, granted to the prefill ranks before the
            # ranks learn their ids.
            for r in reqs:
                for p in peers:
                    p.expect(r["decode_prompt_blocks"])
                for q in assign_qs:
                    q.put((r["id"], rank, r["decode_prompt_blocks"]))
            arrived, out = {}, {}
            deadline = time.monotonic() + 120
            # Requests in order: tensor-parallel ranks generate in step.
            for r in reqs:
                rid = r["id"]
                while len(arrived.get(rid, [])) < expected:
                    if time.monotonic() > deadline:
                        raise RuntimeError("decode rank %d: request %d never arrived" % (rank, rid))
                    agent.progress()
                    for _peer, msg in agent.notifications():
                        n = json.loads(msg)
                        arrived.setdefault(n["id"], []).append(n)
                notes = arrived[rid]
                if len({n["first"] for n in notes}) != 1:
                    raise RuntimeError("decode: prefill ranks disagree on request %d's first token" % rid)
                # Arrived: no peer may write this sequence's blocks again.
                for p in peers:
                    p.revoke(r["decode_prompt_blocks"], read=False)
                out[rid] = eng.generate(notes[0]["first"], notes[0]["prompt_len"], r["decode_blocks"],
                                        args.new_tokens)
            st = agent.stats
            result_q.put(("decode", rank, {
                "tokens": out, "generated": eng.tokens, "seconds": eng.seconds, "layout": eng.cache.layout,
                "backend": eng.cache.backend, "kv_heads": eng.rank.kv_heads, "block_size": m["dbs"],
                "bytes_received": st["bytes_received"], "denied": st["denied"]}))
            # Stay until the prefill ranks said goodbye.
            t0 = time.monotonic()
            while any(p.state[0] == "connected" for p in peers) and time.monotonic() - t0 < 10:
                agent.progress()
            agent.close()
    except Exception:
        result_q.put(("error", "decode rank %d" % rank, traceback.format_exc()))


def run_mode(args, name, prompts, refs):
    m = dict(MODES[name])
    m["play"] = m["play"] or args.prefill_layout
    m["dlay"] = m["dlay"] or args.decode_layout
    ptp, dtp = m["ptp"], m["dtp"]
    reqs, pblocks, dblocks = plan_requests(prompts, args.new_tokens, m["pbs"], m["dbs"])
    ctx = mp.get_context("spawn")
    port_q, result_q = ctx.Queue(), ctx.Queue()
    assign_qs = [ctx.Queue() for _ in range(ptp)]
    dmesh, pmesh = mesh(ctx, dtp), mesh(ctx, ptp)
    dec = [ctx.Process(target=decode_main,
                       args=(args, m, d, reqs, dblocks, port_q, result_q, assign_qs, dmesh[d]))
           for d in range(dtp)]
    for p in dec:
        p.start()
    ports = dict(port_q.get(timeout=120) for _ in range(dtp))
    pre = [ctx.Process(target=prefill_main,
                       args=(args, m, r, [ports[d] for d in range(dtp)], reqs, pblocks, result_q, pmesh[r],
                             assign_qs[r]))
           for r in range(ptp)]
    for p in pre:
        p.start()
    results, errors = {}, []
    while len(results) + len(errors) < ptp + dtp:
        kind, who, data = result_q.get(timeout=300)
        if kind == "error":
            errors.append((who, data))
            break
        results[(kind, who)] = data
    for p in pre + dec:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    if errors:
        for who, tb in errors:
            print("%s failed:\n%s" % (who, tb), file=sys.stderr)
        return False
    ds = [results[("decode", d)] for d in range(dtp)]
    pf = [results[("prefill", r)] for r in range(ptp)]
    tokens = ds[0]["tokens"]
    agree = all(d["tokens"] == tokens for d in ds)
    same = agree and all(tokens[i] == refs[i] for i in range(len(prompts))) and all(d["denied"] == 0 for d in ds)
    print("== %s: prefill at TP %d (%d-token blocks) -> decode at TP %d (%d-token blocks) over %s (UCX_TLS=%s)"
          % (name, ptp, m["pbs"], dtp, m["dbs"], args.transport, os.environ.get("UCX_TLS")))
    for r, s in enumerate(pf):
        print("prefill rank %d: layout %s, backend %s, %d KV head%s: %d prompt tokens, %.0f tokens/s; sends "
              "%s; pushed %d blocks, %d bytes (%s), %.1f ms post to completion" % (
                  r, s["layout"], s["backend"], s["kv_heads"], "" if s["kv_heads"] == 1 else "s", s["tokens"],
                  s["tokens"] / s["seconds"],
                  ", ".join("heads %d+%d to decode rank %d (its %d+%d)" % (lh, n, d, rh, n)
                            for d, lh, rh, n in s["runs"]),
                  s["blocks"], s["bytes"], "/".join(s["methods"]), s["transfer_seconds"] * 1e3))
    for r, d in enumerate(ds):
        print("decode rank %d: layout %s, backend %s, %d KV head%s: %d tokens generated, %.0f tokens/s; received "
              "%d bytes, %d pushes outside the grants" % (
                  r, d["layout"], d["backend"], d["kv_heads"], "" if d["kv_heads"] == 1 else "s", d["generated"],
                  d["generated"] / d["seconds"] if d["seconds"] else 0, d["bytes_received"], d["denied"]))
    if not agree:
        print("decode ranks disagree: %s" % [d["tokens"] for d in ds])
    for i, prompt in enumerate(prompts):
        mark = "==" if tokens[i] == refs[i] else "!="
        print("  prompt %d (%d tokens): %s %s reference" % (i, len(prompt), tokens[i], mark))
        if tokens[i] != refs[i]:
            print("    reference: %s" % refs[i])
    print("tokens identical: %s" % ("yes" if same else "no"))
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES) + sorted(GROUPS), default="all",
                    help="which pairing of prefill and decode groups to run (default all; see above)")
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="tcp")
    ap.add_argument("--prompts", type=int, default=3, help="number of prompts (default 3)")
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens generated per prompt (default 16)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the weights and prompts")
    ap.add_argument("--prefill-layout", default="HND", help="prefill's layout where the mode names none")
    ap.add_argument("--decode-layout", default="BLNHC", help="decode's layout where the mode names none")
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
    for name in GROUPS.get(args.mode, [args.mode]):
        ok = run_mode(args, name, prompts, refs) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
