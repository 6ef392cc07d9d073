"""Hugging Face BERT built from a config (no weights downloaded).

Needs `pip install transformers`.
"""

from __future__ import annotations

import torch
from transformers import BertConfig, BertModel


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=1000,
        hidden_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=256,
    )
    return BertModel(config).eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randint(0, 1000, (1, 64)),)
