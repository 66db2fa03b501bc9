"""A GPT-2-style model as a list of blocks (embedding, transformer blocks,
LM head), for the kaiten.torch benchmark (bench/torch_kaiten.py) and the
oracle's kaiten.torch checks (tests/oracle/kaiten_torch.py).

GPT-2's architecture (pre-LayerNorm blocks, causal attention, tanh GELU,
learned positions) with an untied LM head over the vocabulary; the head
over a large vocabulary is the heaviest block, as in many real models.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Embed(nn.Module):
    def __init__(self, vocab, hidden, seq_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)

    def forward(self, idx):  # (B, T) int64 -> (B, T, C)
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.tok(idx) + self.pos(pos)


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x):  # (B, T, C)
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Head(nn.Module):
    def __init__(self, hidden, vocab):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.lm = nn.Linear(hidden, vocab, bias=False)

    def forward(self, x):  # (B, T, C) -> (B, T, V) logits
        return self.lm(self.ln(x))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def blocks(layers, hidden, heads, vocab, seq_len, seed=0):
    """[Embed, Block x layers, Head], initialised as GPT-2 (N(0, 0.02),
    residual projections scaled by 1/sqrt(2 layers)), the same for a seed."""
    torch.manual_seed(seed)
    out = [Embed(vocab, hidden, seq_len)] + [Block(hidden, heads) for _ in range(layers)] + \
        [Head(hidden, vocab)]
    for m in out:
        for name, p in m.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.split(".")[0] in ("proj", "out") else 0.02
                nn.init.normal_(p, 0.0, std)
    return out


def batch(step, n, seq_len, vocab, seed=1):
    """n sequences of tokens and next-token targets for a step (synthetic,
    the same for every run)."""
    g = torch.Generator().manual_seed(seed * 1000003 + step)
    data = torch.randint(0, vocab, (n, seq_len + 1), generator=g)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()
