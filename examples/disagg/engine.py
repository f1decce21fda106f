"""The two halves of a disaggregated engine, each on its own kvrt cache.

PrefillEngine runs a prompt: every layer's new K/V go into the kvrt cache
with `cache.write`, and the prompt's attention reads them back through the
cache's DLPack views (the way an engine's own attention kernel reads a
vLLM-layout cache).  With tensor parallelism a rank holds only its share of
the KV heads and computes attention for the query heads that read them; the
ranks exchange their attention outputs after every layer.

DecodeEngine continues a sequence whose prompt K/V arrived in its cache from
elsewhere: each new token's K/V are appended with `cache.write` and
attention is `cache.decode` (kvrt's paged single-query attention); its
tensor-parallel ranks exchange their outputs after every layer too.

Which KV and query heads a rank holds is vLLM's rule, as libkvrt states it
(kvrt.tp_heads): split where the heads divide over the ranks, one head
replicated over several ranks where there are more ranks than KV heads.
"""
import math
import time

import torch

from model import attention


def slots_of(block_ids, positions, block_size):
    """Cache slots of token positions of a sequence whose block table is
    block_ids (vLLM's slot rule)."""
    table = torch.as_tensor(block_ids, dtype=torch.int64)
    return table[positions // block_size] * block_size + positions % block_size


class Rank:
    """What a tensor-parallel rank holds, by vLLM's rule as libkvrt states
    it (kvrt.tp_heads): its KV heads (split, or one replicated head) and the
    query heads that read them."""

    def __init__(self, cfg, tp_rank, tp_size):
        import kvrt
        if cfg.q_heads % tp_size:
            raise ValueError("q_heads (%d) must split over %d ranks" % (cfg.q_heads, tp_size))
        h = kvrt.tp_heads(cfg.kv_heads, tp_size, tp_rank)
        self.tp_rank, self.tp_size = tp_rank, tp_size
        self.kv_heads = h["num_heads"]
        self.kh = slice(h["head_start"], h["head_start"] + h["num_heads"])
        per = cfg.q_heads // tp_size
        self.qh = slice(tp_rank * per, (tp_rank + 1) * per)


class PrefillEngine:
    def __init__(self, rt, cfg, model, layout, blocks, block_size, backend=None, tp_rank=0, tp_size=1,
                 exchange=None):
        self.cfg, self.model, self.block_size = cfg, model, block_size
        self.rank = Rank(cfg, tp_rank, tp_size)
        self.tp_size, self.exchange = tp_size, exchange
        self.kv_heads = self.rank.kv_heads
        self.cache = rt.cache(model=cfg.kvrt_model(kv_heads=self.kv_heads, block_size=block_size), layout=layout,
                              blocks=blocks, backend=backend)
        # Zero-copy views of the cache, [blocks, heads, tokens, head_size]
        # with the layout's strides.
        self.k = [torch.from_dlpack(self.cache.k(l)) for l in range(cfg.layers)]
        self.v = [torch.from_dlpack(self.cache.v(l)) for l in range(cfg.layers)]
        self.seconds = 0.0
        self.tokens = 0

    def _gathered(self, view, block_ids, length):
        """The sequence's K or V, [length, heads, head_size], read through a view."""
        pages = view[torch.as_tensor(block_ids, dtype=torch.int64)]  # [nb, H, N, D]
        return pages.permute(0, 2, 1, 3).reshape(-1, pages.shape[1], pages.shape[3])[:length]

    def prefill(self, prompt, block_ids):
        """Run the prompt; returns the first generated token."""
        c = self.cfg
        t0 = time.perf_counter()
        n = len(prompt)
        positions = torch.arange(n)
        slots = slots_of(block_ids, positions, self.block_size)
        kh, qh = self.rank.kh, self.rank.qh

        def attend(layer, q, k, v, pos):
            self.cache.write(layer, slots, k[:, kh].contiguous(), v[:, kh].contiguous())
            kk = self._gathered(self.k[layer], block_ids, n)
            vv = self._gathered(self.v[layer], block_ids, n)
            out = attention(q[:, qh], kk, vv, pos, 1.0 / math.sqrt(c.head_size))
            return self.exchange(out) if self.tp_size > 1 else out

        logits = self.model.forward(torch.tensor(prompt, dtype=torch.int64), positions, attend)
        self.seconds += time.perf_counter() - t0
        self.tokens += n
        return int(torch.argmax(logits[-1]))


class DecodeEngine:
    def __init__(self, rt, cfg, model, layout, blocks, block_size, backend=None, tp_rank=0, tp_size=1,
                 exchange=None):
        self.cfg, self.model, self.block_size = cfg, model, block_size
        self.rank = Rank(cfg, tp_rank, tp_size)
        self.tp_size, self.exchange = tp_size, exchange
        self.cache = rt.cache(model=cfg.kvrt_model(kv_heads=self.rank.kv_heads, block_size=block_size),
                              layout=layout, blocks=blocks, backend=backend)
        self.seconds = 0.0
        self.tokens = 0

    def generate(self, first_token, prompt_len, block_ids, new_tokens):
        """Greedy tokens after the prompt whose K/V sit in block_ids: the
        first came from prefill; new_tokens - 1 more are decoded here (with
        tensor parallelism, in step with the other ranks)."""
        t0 = time.perf_counter()
        table = torch.tensor([block_ids], dtype=torch.int32)
        kh, qh = self.rank.kh, self.rank.qh
        out = [first_token]
        pos = prompt_len
        while len(out) < new_tokens:
            positions = torch.tensor([pos])
            slot = slots_of(block_ids, positions, self.block_size)

            def attend(layer, q, k, v, _pos):
                self.cache.write(layer, slot, k[:, kh].contiguous(), v[:, kh].contiguous())
                o = self.cache.decode(layer, q[:, qh].contiguous(), table, torch.tensor([pos + 1], dtype=torch.int32))
                return self.exchange(o) if self.tp_size > 1 else o

            logits = self.model.forward(torch.tensor([out[-1]]), positions, attend)
            out.append(int(torch.argmax(logits[-1])))
            pos += 1
        self.seconds += time.perf_counter() - t0
        self.tokens += len(out) - 1
        return out
