"""Hugging Face GPT-2 built from a config (no weights downloaded).

Needs `pip install transformers`.
"""

from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2Model


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=256, vocab_size=1000)
    return GPT2Model(config).eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randint(0, 1000, (1, 64)),)
