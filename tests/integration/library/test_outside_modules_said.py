"""The with-block's leaves-only selection and a parent that does its layers' work itself."""

from __future__ import annotations

import statistics

import torch
from torch import nn

import hybridprof


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


def test_attention_that_never_calls_its_out_proj_is_a_leaf_in_effect() -> None:
    """nn.MultiheadAttention uses out_proj's weights without calling it: with leaves only (as
    torchprof selected) the attention's whole time was in (outside modules), in no row. It is
    selected as a leaf in effect now, so its time is its own row and nothing says it is outside."""
    torch.manual_seed(0)
    model, x = Encoder().train(), torch.randn(4, 16, 32)
    with hybridprof.Profile(model) as prof:
        model(x).sum().backward()
    session = prof.session()
    assert "block.self_attn.out_proj" in session.never_called
    assert not [w for w in session.warnings if "(outside modules)" in w]
    attention = session.record("block.self_attn")
    assert attention is not None and attention.self_cpu_us.median > 0
    assert "out_proj's weights without calling it" in session.plan.target("block.self_attn").reason
    with hybridprof.Profile(model, leaves_only=False) as prof:
        model(x).sum().backward()
    complete = prof.session()
    assert complete.outside_cpu_us is not None and session.outside_cpu_us is not None
    # the attention's work is no longer outside: what is left there is about what the complete
    # selection leaves (the loss and autograd's own work), not the attention's forward and backward
    leaves_outside = session.outside_cpu_us.median / statistics.median(session.iteration_cpu_us)
    complete_outside = complete.outside_cpu_us.median / statistics.median(complete.iteration_cpu_us)
    assert leaves_outside < complete_outside + 0.15, (leaves_outside, complete_outside)
