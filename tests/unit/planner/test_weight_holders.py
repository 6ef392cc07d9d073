"""Which parents use a child's weights without calling it (a leaves-only selection takes them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hybridprof.planner.module_tree import select_targets
from hybridprof.planner.weight_holders import held_children


class TiedHead(nn.Module):
    """Uses `proj`'s parameters through F.linear, never calls it; calls `norm`."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(x), self.proj.weight, self.proj.bias)


class CallsAndUsesWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + self.proj.weight.sum()


class LoopsOverChildren(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for child in self.children():
            x = child(x)
        return x * self.proj.weight.sum()


def test_only_a_child_named_solely_by_its_parameters_is_held() -> None:
    assert held_children(nn.MultiheadAttention(8, 2)) == ("out_proj",)
    assert held_children(TiedHead()) == ("proj",)
    assert held_children(CallsAndUsesWeight()) == ()
    assert held_children(LoopsOverChildren()) == ()
    assert held_children(nn.Sequential(nn.Linear(2, 2))) == ()


def test_an_instance_forward_is_taken_as_calling_its_children() -> None:
    head = TiedHead()
    head.forward = lambda x: head.proj(x)  # type: ignore[method-assign]
    assert held_children(head) == ()


def test_leaves_only_selects_the_holder_with_its_reason() -> None:
    model = nn.Sequential(TiedHead(), nn.ReLU())
    chosen = {t.path: t.reason for t in select_targets(model, leaves_only=True) if t.selected}
    assert chosen == {
        "0": "uses proj's weights without calling it: a leaf in effect",
        "0.norm": "leaf",
        "0.proj": "leaf",
        "1": "leaf",
    }
    assert "0" in {t.path for t in select_targets(model) if t.selected}  # complete: as before
