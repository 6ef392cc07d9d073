"""The with-block's leaves-only selection and a parent that does its layers' work itself."""

from __future__ import annotations

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
    # Before, (outside modules) held the attention's whole forward and backward. What a leaves-only
    # run leaves outside now is what the complete run gives rows to the parents for (their own
    # ops: the encoder layer's residual adds and glue) plus the complete run's own outside; the
    # attention, about half of the step here, is not in it.
    rows = {r.path: r for r in complete.records}
    attention = rows["block.self_attn"]
    attention_us = attention.total_cpu_us.median + attention.backward_total_cpu_us.median
    parents_us = sum(
        rows[p].self_cpu_us.median + rows[p].backward_self_cpu_us.median for p in ("", "block")
    )
    expected_us = complete.outside_cpu_us.median + parents_us
    assert session.outside_cpu_us.median < expected_us + 0.5 * attention_us, (
        session.outside_cpu_us.median,
        expected_us,
        attention_us,
    )
