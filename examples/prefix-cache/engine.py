"""An engine of the prefix-cache example: one rank of the small
transformer of examples/disagg/model.py, at any tensor and pipeline
parallelism, on a kvrt cache of any layout and block size, with a
kvrt.Store.

A pipeline stage holds the layers libkvrt's rule gives it (kvrt.pp_layers:
vLLM's split) and only those in its cache; it receives the hidden states
from the stage before and sends its own to the stage after
(torch.distributed send/recv), and the last stage's greedy token is
broadcast to every rank.  Within a stage, a rank holds the KV heads
kvrt.tp_heads gives it (vLLM's split, or its replication when the TP size
exceeds the KV heads) and the query heads that read them; attention runs
over the cache's DLPack views (the engine's own kernel reading a
vLLM-layout cache), and the stage's ranks all-gather their attention
outputs after every layer (gloo).  The projections are replicated, not
split, which changes nothing about the cache.  Each rank puts and gets its
own heads of its own layers: the store's layer groups (layers_per_entry)
keep them apart.
"""
import math
import time

import torch
import torch.distributed as dist

import kvrt
from model import attention, rms_norm, rope


def slots_of(block_ids, positions, block_size):
    """Cache slots of token positions of a sequence (vLLM's slot rule)."""
    table = torch.as_tensor(block_ids, dtype=torch.int64)
    return table[positions // block_size] * block_size + positions % block_size


def store_model(cfg):
    """The whole model as the store keeps it: every layer, every KV head."""
    return {"layers": cfg.layers, "kv_heads": cfg.kv_heads, "head_size": cfg.head_size, "dtype": "fp32"}


def stage_model(cfg, start, count, kv_heads, block_size):
    """A stage's cache: the model's layers [start, start + count), named as
    the store's model names them (layer.N), its heads and block size."""
    spec = {"kv_heads": kv_heads, "head_size": cfg.head_size, "dtype": "fp32", "block_size": block_size}
    return {"groups": [{"layers": [dict(spec, name="layer.%d" % i) for i in range(start, start + count)]}]}


class Engine:
    def __init__(self, rt, store, cfg, model, layout, block_size, blocks, tp=1, rank=0, pp=1, stage=0,
                 tp_group=None):
        self.cfg, self.model, self.store = cfg, model, store
        self.tp, self.rank, self.block_size = tp, rank, block_size
        self.pp, self.stage, self.tp_group = pp, stage, tp_group
        self.me = stage * tp + rank  # the global rank: stages in order, a stage's TP ranks together
        self.layers = kvrt.pp_layers(cfg.layers, pp, stage)  # (start, count)
        heads = kvrt.tp_heads(cfg.kv_heads, tp, rank)
        self.kv = slice(heads["head_start"], heads["head_start"] + heads["num_heads"])
        per = cfg.q_heads // tp
        self.q = slice(rank * per, (rank + 1) * per)
        m = stage_model(cfg, self.layers[0], self.layers[1], heads["num_heads"], block_size)
        self.cache = rt.cache(model=m, layout=layout, blocks=blocks, backend="cpu")
        self.k = [torch.from_dlpack(self.cache.k(l)) for l in range(self.layers[1])]
        self.v = [torch.from_dlpack(self.cache.v(l)) for l in range(self.layers[1])]
        self.heads = heads

    def _gathered(self, view, block_ids, length):
        pages = view[torch.as_tensor(block_ids, dtype=torch.int64)]  # [nb, H, N, D]
        return pages.permute(0, 2, 1, 3).reshape(-1, pages.shape[1], pages.shape[3])[:length]

    def _forward(self, tokens, positions, block_ids, length):
        """The stage's layers over the new tokens (their K/V go into the
        cache): the last stage returns the logits of the last position, the
        others send their hidden states on and return None."""
        c, m = self.cfg, self.model
        slots = slots_of(block_ids, positions, self.block_size)
        scale = 1.0 / math.sqrt(c.head_size)
        n = len(tokens)
        if self.stage == 0:
            x = m.embed[torch.as_tensor(tokens, dtype=torch.int64)]
        else:
            x = torch.empty(n, c.hidden)
            dist.recv(x, src=self.me - self.tp)
        start, count = self.layers
        for local in range(count):
            b = m.blocks[start + local]
            h = rms_norm(x, b["norm1"])
            q = rope((h @ b["wq"]).view(n, c.q_heads, c.head_size), positions, c.rope_theta)
            k = rope((h @ b["wk"]).view(n, c.kv_heads, c.head_size), positions, c.rope_theta)
            v = (h @ b["wv"]).view(n, c.kv_heads, c.head_size)
            self.cache.write(local, slots, k[:, self.kv].contiguous(), v[:, self.kv].contiguous())
            kk = self._gathered(self.k[local], block_ids, length)
            vv = self._gathered(self.v[local], block_ids, length)
            a = attention(q[:, self.q].contiguous(), kk, vv, positions, scale)
            if self.tp > 1:
                parts = [torch.empty_like(a) for _ in range(self.tp)]
                dist.all_gather(parts, a.contiguous(), group=self.tp_group)
                a = torch.cat(parts, dim=1)
            x = x + a.reshape(n, c.q_heads * c.head_size) @ b["wo"]
            h = rms_norm(x, b["norm2"])
            x = x + (torch.nn.functional.silu(h @ b["w_gate"]) * (h @ b["w_up"])) @ b["w_down"]
        if self.stage < self.pp - 1:
            dist.send(x.contiguous(), dst=self.me + self.tp)
            return None
        return (rms_norm(x, m.norm) @ m.lm_head)[-1]

    def _next_token(self, logits):
        """The greedy token, known to every rank of every stage."""
        t = torch.tensor([int(torch.argmax(logits)) if logits is not None else 0], dtype=torch.int64)
        if self.pp > 1:
            dist.broadcast(t, src=(self.pp - 1) * self.tp)
        return int(t[0])

    def _agreed(self, loaded):
        """The tokens every rank loaded: each computes from the least."""
        if self.pp * self.tp == 1:
            return loaded
        t = torch.tensor([loaded], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return int(t[0])

    def serve(self, prompt, block_ids, new_tokens, use_store=True):
        """Greedy tokens after the prompt.  With the store: its leading
        stored chunks of this rank's heads and layers are loaded (never the
        last prompt token, whose logits start generation), only the rest is
        prefilled, and the prompt's whole chunks are put afterwards.
        Returns (tokens, loaded, prefill seconds: the store's get and the
        prefill, timed together)."""
        n = len(prompt)
        t0 = time.perf_counter()
        loaded = 0
        if use_store:
            loaded = self._agreed(self.store.get(self.cache, block_ids, prompt, count=n - 1, tp=(self.tp, self.rank),
                                                 layers=self.layers))
        token = self._next_token(self._forward(prompt[loaded:], torch.arange(loaded, n), block_ids, n))
        seconds = time.perf_counter() - t0
        out, pos = [token], n
        while len(out) < new_tokens:
            out.append(self._next_token(self._forward([out[-1]], torch.tensor([pos]), block_ids, pos + 1)))
            pos += 1
        if use_store:
            self.store.put(self.cache, block_ids, prompt, tp=(self.tp, self.rank), layers=self.layers)
        return out, loaded, seconds
