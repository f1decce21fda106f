"""A small decoder-only transformer in plain torch, for the disaggregated
serving example.

Weights are drawn from a fixed seed, so every process that builds the model
with the same seed holds the same network.  The arithmetic is fp32.  The
model never stores K/V itself: each forward pass hands its new K/V and its
queries to an `attend` callback, which owns the cache (a list of tensors in
the reference, a kvrt cache in the prefill and decode processes) and returns
the attention output.
"""
import math

import torch


class Config:
    def __init__(self, vocab=1000, hidden=256, layers=4, q_heads=8, kv_heads=2, head_size=32, ffn=512,
                 rope_theta=10000.0, block_size=16):
        self.vocab = vocab
        self.hidden = hidden
        self.layers = layers
        self.q_heads = q_heads
        self.kv_heads = kv_heads
        self.head_size = head_size
        self.ffn = ffn
        self.rope_theta = rope_theta
        self.block_size = block_size
        if q_heads % kv_heads:
            raise ValueError("q_heads (%d) must be a multiple of kv_heads (%d)" % (q_heads, kv_heads))

    def kvrt_model(self, kv_heads=None, block_size=None):
        """The kvrt cache description of this model (optionally of a slice of
        its KV heads, for a tensor-parallel rank, and another block size)."""
        return {"layers": self.layers, "kv_heads": kv_heads or self.kv_heads, "head_size": self.head_size,
                "dtype": "fp32", "block_size": block_size or self.block_size}


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, positions, theta):
    """Rotary position embedding of x [T, heads, D] at integer positions [T]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).to(x.dtype)[:, None, :]
    sin = torch.sin(ang).to(x.dtype)[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


class TinyLM:
    def __init__(self, cfg, seed):
        self.cfg = cfg
        g = torch.Generator().manual_seed(seed)

        def w(*shape, scale):
            return torch.randn(*shape, generator=g, dtype=torch.float32) * scale

        c = cfg
        hs = 1.0 / math.sqrt(c.hidden)
        self.embed = w(c.vocab, c.hidden, scale=1.0)
        self.blocks = []
        for _ in range(c.layers):
            self.blocks.append({
                "norm1": 1.0 + w(c.hidden, scale=0.1),
                "wq": w(c.hidden, c.q_heads * c.head_size, scale=hs),
                "wk": w(c.hidden, c.kv_heads * c.head_size, scale=hs),
                "wv": w(c.hidden, c.kv_heads * c.head_size, scale=hs),
                "wo": w(c.q_heads * c.head_size, c.hidden, scale=1.0 / math.sqrt(c.q_heads * c.head_size)),
                "norm2": 1.0 + w(c.hidden, scale=0.1),
                "w_gate": w(c.hidden, c.ffn, scale=hs),
                "w_up": w(c.hidden, c.ffn, scale=hs),
                "w_down": w(c.ffn, c.hidden, scale=1.0 / math.sqrt(c.ffn)),
            })
        self.norm = 1.0 + w(c.hidden, scale=0.1)
        self.lm_head = w(c.hidden, c.vocab, scale=hs)

    def forward(self, tokens, positions, attend):
        """Logits [T, vocab] of the last position block.  tokens, positions:
        int64 [T].  attend(layer, q [T, Hq, D], k [T, H, D], v [T, H, D],
        positions) stores k/v for `positions` and returns the attention
        output [T, Hq, D] of q over every stored position up to its own."""
        c = self.cfg
        x = self.embed[tokens]
        n = tokens.shape[0]
        for layer, b in enumerate(self.blocks):
            h = rms_norm(x, b["norm1"])
            q = rope((h @ b["wq"]).view(n, c.q_heads, c.head_size), positions, c.rope_theta)
            k = rope((h @ b["wk"]).view(n, c.kv_heads, c.head_size), positions, c.rope_theta)
            v = (h @ b["wv"]).view(n, c.kv_heads, c.head_size)
            a = attend(layer, q.contiguous(), k.contiguous(), v.contiguous(), positions)
            x = x + a.reshape(n, c.q_heads * c.head_size) @ b["wo"]
            h = rms_norm(x, b["norm2"])
            x = x + (torch.nn.functional.silu(h @ b["w_gate"]) * (h @ b["w_up"])) @ b["w_down"]
        return rms_norm(x, self.norm) @ self.lm_head


def attention(q, k, v, q_positions, scale):
    """Causal grouped-query attention in fp32: q [T, Hq, D] at q_positions
    over k, v [S, H, D] (positions 0..S-1).  Returns [T, Hq, D]."""
    hq, h = q.shape[1], k.shape[1]
    group = hq // h
    kk = k.repeat_interleave(group, dim=1)  # query head i reads KV head i // group
    vv = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, kk) * scale
    s = k.shape[0]
    mask = torch.arange(s)[None, :] > q_positions[:, None]
    scores = scores.masked_fill(mask[None, :, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("hts,shd->thd", p, vv)


class ReferenceCache:
    """Plain torch K/V lists: the reference run, with no kvrt at all."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.k = [torch.zeros(0, cfg.kv_heads, cfg.head_size) for _ in range(cfg.layers)]
        self.v = [torch.zeros(0, cfg.kv_heads, cfg.head_size) for _ in range(cfg.layers)]

    def attend(self, layer, q, k, v, positions):
        self.k[layer] = torch.cat([self.k[layer], k])
        self.v[layer] = torch.cat([self.v[layer], v])
        return attention(q, self.k[layer], self.v[layer], positions, 1.0 / math.sqrt(self.cfg.head_size))


def top2_margin(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def generate_reference(model, prompt, new_tokens):
    """Greedy tokens after `prompt` and the smallest top-2 logit margin seen
    (a near-tie makes a comparison meaningless, so callers check it)."""
    cache = ReferenceCache(model.cfg)
    tokens = torch.tensor(prompt, dtype=torch.int64)
    logits = model.forward(tokens, torch.arange(len(prompt)), cache.attend)[-1]
    out, margin = [], math.inf
    pos = len(prompt)
    for _ in range(new_tokens):
        margin = min(margin, top2_margin(logits))
        t = int(torch.argmax(logits))
        out.append(t)
        logits = model.forward(torch.tensor([t]), torch.tensor([pos]), cache.attend)[-1]
        pos += 1
    return out, margin
