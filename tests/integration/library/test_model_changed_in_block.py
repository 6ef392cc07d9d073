"""A child added or replaced inside a with-block is said: it is not measured (L-7)."""

from __future__ import annotations

import torch
from torch import nn

import hybridprof


class Growing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.extra: nn.Module | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        return self.extra(x) if self.extra is not None else x


def test_a_child_added_and_one_replaced_inside_the_block_are_named_in_a_warning() -> None:
    model, x = Growing(), torch.randn(2, 8)
    with hybridprof.Profile(model) as prof:
        model.extra = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        model.fc = nn.Linear(8, 8)
        model(x)
    (said,) = [w for w in prof.session().warnings if "changed inside the block" in w]
    assert "(extra added, fc replaced)" in said  # the new Sequential's own children not listed
    assert said.endswith("change the model before the block")
    assert "extra" not in {r.path for r in prof.session().records}


def test_an_unchanged_model_says_nothing_about_it() -> None:
    model, x = Growing(), torch.randn(2, 8)
    with hybridprof.Profile(model) as prof:
        model(x)
    assert not any("changed inside the block" in w for w in prof.session().warnings)
