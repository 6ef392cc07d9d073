"""What a plan may hold: module names hybridprof can save and read back, each path once."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from torch import nn

from hybridprof.datamodel import ModuleTarget, ProfilePlan
from hybridprof.errors import UsageError
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import tree_plan
from hybridprof.planner.name_bounds import MAX_NAME, checked_names
from hybridprof.planner.plan_check import checked_plan


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 4)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.fc2(self.act(self.fc1(x)))


def test_a_name_too_long_to_save_is_refused_when_the_tree_is_read() -> None:
    model = Net()
    model.add_module("n" * 200_000, nn.Linear(4, 4))
    with pytest.raises(UsageError) as caught:
        tree_plan(model)
    message = str(caught.value)
    assert message == (
        f"a module path of 200,000 characters ({'n' * 40!r}...) is longer than hybridprof can "
        f"save ({MAX_NAME:,}); give the module a shorter name"
    )


def test_a_class_name_too_long_to_save_is_refused() -> None:
    model = Net()
    model.head = type("C" * 30_000, (nn.Linear,), {})(4, 4)
    with pytest.raises(UsageError, match="a class name of 30,000 characters"):
        tree_plan(model)


def test_a_tree_deeper_than_a_session_may_be_is_refused() -> None:
    # (torch's own recursive walks give up near 1,000 levels; the check is on the targets)
    path = ".".join(["a"] * 1_001)
    deep = ModuleTarget(path, "Linear", "torch.nn.Linear", 1_001, True, True, "leaf")
    with pytest.raises(UsageError, match="is 1,001 modules deep, deeper than hybridprof can show"):
        checked_names([deep])
    assert checked_names([replace(deep, path=path[2:], depth=1_000)])


def _twice(plan: ProfilePlan, index: int, **change: object) -> ProfilePlan:
    return replace(plan, targets=(*plan.targets, replace(plan.targets[index], **change)))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: replace(p, targets=p.targets + p.targets), "'' (the root) twice (targets[0] "),
        (lambda p: _twice(p, 1), "'fc1' twice (targets[1] and targets[4])"),
        (lambda p: _twice(p, 1, selected=False), "'fc1' twice (targets[1] and targets[4])"),
    ],
)
def test_a_plan_listing_a_path_twice_is_refused(make, said: str) -> None:
    model = Net()
    plan = make(tree_plan(model))
    ProfilePlan.from_json(plan.to_json())  # it reads: the file is well-formed, its content not
    with pytest.raises(UsageError) as caught:
        checked_plan(plan, model, probe(), [])
    assert said in str(caught.value)
    assert str(caught.value).endswith("make the plan again with `hybridprof analyze`")
    assert json.loads(plan.to_json())  # the plan itself is left as it was
