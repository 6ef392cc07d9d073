"""Modules whose children never run a Python forward: TorchScript is one layer, torch.compile
refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.planner.live_plan import plan_model

# torch 2.13 deprecates TorchScript; users still hand us scripted modules, so we test them.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),  # torch 2.13
    pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning"),  # torch 2.14
]


class EagerWithScriptedChild(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.body = torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.head(x))


def test_scripted_child_is_one_opaque_layer_and_restored_exactly() -> None:
    model = EagerWithScriptedChild()
    own_forward = model.body.__dict__["forward"]  # TorchScript keeps its forward on the instance
    x = torch.rand(2, 4)
    expected = model(x)
    with hybridprof.Profile(model) as prof:
        out = model(x)
    assert torch.equal(out, expected)
    session = prof.session()
    assert {r.path: r.calls for r in session.records} == {"head": 1, "body": 1}
    assert session.record("body").class_name == "Sequential (TorchScript)"  # type: ignore[union-attr]
    assert model.body.__dict__["forward"] is own_forward
    assert "forward" not in model.head.__dict__


def test_plan_says_why_a_scripted_module_is_one_layer() -> None:
    plan = plan_model(EagerWithScriptedChild())
    assert [t.path for t in plan.targets] == ["", "head", "body"]
    assert any(f.kind == "opaque" and f.path == "body" for f in plan.findings)


@pytest.mark.parametrize("make", ["script", "trace"])
def test_scripted_or_traced_root_is_profiled_as_one_layer(make: str) -> None:
    eager = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.rand(2, 4)
    model = torch.jit.script(eager) if make == "script" else torch.jit.trace(eager, x)
    with hybridprof.Profile(model) as prof:
        model(x)
    assert [(r.path, r.calls) for r in prof.session().records] == [("", 1)]
