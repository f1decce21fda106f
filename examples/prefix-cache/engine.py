"""An engine of the prefix-cache example: one tensor-parallel rank of the
small transformer of examples/disagg/model.py on a kvrt cache of any
layout and block size, with a kvrt.Store.

A rank holds the KV heads libkvrt's rule gives it (kvrt.tp_heads: vLLM's
split, or its replication when the TP size exceeds the KV heads) and the
query heads that read them; attention runs over the cache's DLPack views
(the engine's own kernel reading a vLLM-layout cache), and the ranks
all-gather their attention outputs after every layer (torch.distributed,
gloo).  The projections are replicated, not split, which changes nothing
about the cache.
"""
import math
import time

import torch
import torch.distributed as dist

import kvrt
from model import attention


def slots_of(block_ids, positions, block_size):
    """Cache slots of token positions of a sequence (vLLM's slot rule)."""
    table = torch.as_tensor(block_ids, dtype=torch.int64)
    return table[positions // block_size] * block_size + positions % block_size


def store_model(cfg):
    """The whole model as the store keeps it: every layer, every KV head."""
    return {"layers": cfg.layers, "kv_heads": cfg.kv_heads, "head_size": cfg.head_size, "dtype": "fp32"}


class Engine:
    def __init__(self, rt, store, cfg, model, layout, block_size, blocks, tp=1, rank=0):
        self.cfg, self.model, self.store = cfg, model, store
        self.tp, self.rank, self.block_size = tp, rank, block_size
        heads = kvrt.tp_heads(cfg.kv_heads, tp, rank)
        self.kv = slice(heads["head_start"], heads["head_start"] + heads["num_heads"])
        per = cfg.q_heads // tp
        self.q = slice(rank * per, (rank + 1) * per)
        m = dict(store_model(cfg), kv_heads=heads["num_heads"], block_size=block_size)
        self.cache = rt.cache(model=m, layout=layout, blocks=blocks, backend="cpu")
        self.k = [torch.from_dlpack(self.cache.k(l)) for l in range(cfg.layers)]
        self.v = [torch.from_dlpack(self.cache.v(l)) for l in range(cfg.layers)]
        self.heads = heads

    def _gathered(self, view, block_ids, length):
        pages = view[torch.as_tensor(block_ids, dtype=torch.int64)]  # [nb, H, N, D]
        return pages.permute(0, 2, 1, 3).reshape(-1, pages.shape[1], pages.shape[3])[:length]

    def _forward(self, tokens, positions, block_ids, length):
        """Logits of the last position; the new tokens' K/V go into the cache."""
        c = self.cfg
        slots = slots_of(block_ids, positions, self.block_size)

        def attend(layer, q, k, v, pos):
            self.cache.write(layer, slots, k[:, self.kv].contiguous(), v[:, self.kv].contiguous())
            kk = self._gathered(self.k[layer], block_ids, length)
            vv = self._gathered(self.v[layer], block_ids, length)
            out = attention(q[:, self.q], kk, vv, pos, 1.0 / math.sqrt(c.head_size))
            if self.tp == 1:
                return out
            parts = [torch.empty_like(out) for _ in range(self.tp)]
            dist.all_gather(parts, out.contiguous())
            return torch.cat(parts, dim=1)

        return self.model.forward(torch.as_tensor(tokens, dtype=torch.int64), positions, attend)[-1]

    def serve(self, prompt, block_ids, new_tokens, use_store=True):
        """Greedy tokens after the prompt.  With the store: its leading
        stored chunks are loaded (never the last prompt token, whose logits
        start generation), only the rest is prefilled, and the prompt's
        whole chunks are put afterwards.  Returns (tokens, loaded,
        prefill seconds: the store's get and the prefill, timed together)."""
        n = len(prompt)
        t0 = time.perf_counter()
        loaded = 0
        if use_store:
            loaded = self.store.get(self.cache, block_ids, prompt, count=n - 1, tp=(self.tp, self.rank))
        logits = self._forward(prompt[loaded:], torch.arange(loaded, n), block_ids, n)
        seconds = time.perf_counter() - t0
        out, pos = [], n
        while True:
            out.append(int(torch.argmax(logits)))
            if len(out) == new_tokens:
                break
            logits = self._forward([out[-1]], torch.tensor([pos]), block_ids, pos + 1)
            pos += 1
        if use_store:
            self.store.put(self.cache, block_ids, prompt, tp=(self.tp, self.rank))
        return out, loaded, seconds
