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


def test_attention_that_never_calls_its_out_proj_is_said_to_be_outside_with_the_fix() -> None:
    """nn.MultiheadAttention uses out_proj's weights without calling it: with leaves only (as
    torchprof did) the attention's whole time is outside, and a warning says which and how to
    give it a row."""
    torch.manual_seed(0)
    model, x = Encoder().train(), torch.randn(4, 16, 32)
    with hybridprof.Profile(model) as prof:
        model(x).sum().backward()
    session = prof.session()
    assert "block.self_attn.out_proj" in session.never_called
    (said,) = [w for w in session.warnings if "never ran" in w]
    assert said.startswith("block.self_attn.out_proj never ran: the module around it does")
    assert "(outside modules)" in said and said.endswith("pass leaves_only=False")
    with hybridprof.Profile(model, leaves_only=False) as prof:
        model(x).sum().backward()
    rows = {r.path: r for r in prof.session().records}
    assert rows["block.self_attn"].self_cpu_us.median > 0  # the fix gives it its row
