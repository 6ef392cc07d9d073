"""A wide run for the report tests: a small GPT-style transformer (written here: its attention
runs F.scaled_dot_product_attention, its blocks sit in a ModuleList) profiled with --backward
--flops --profile-memory, the run whose reports used to be too wide for every medium."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hybridprof.api import profile
from hybridprof.datamodel import ProfileSession


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attention_with_a_long_name = SelfAttention(dim, 4)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention_with_a_long_name(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGpt(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, depth: int = 3) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.h = nn.ModuleList([DecoderBlock(dim) for _ in range(depth)])
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens)
        for block in self.h:
            x = block(x)
        return self.lm_head(x)


def wide_session() -> ProfileSession:
    torch.manual_seed(0)
    tokens = torch.randint(0, 64, (2, 16))
    return profile(
        TinyGpt(),
        tokens,
        warmup=1,
        iters=6,
        backward=True,
        flops=True,
        profile_memory=True,
        peak_gflops=1000.0,
        peak_gbps=1000.0,
        threads=1,
    )
