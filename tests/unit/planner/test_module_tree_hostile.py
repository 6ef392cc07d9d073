"""Module trees torch builds but a dotted-path walk can trip over: cycles, child names no path can
spell, names that are not text (issue 25: M-5, L-6, L-2)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.api.profiler import module_traces
from hybridprof.errors import SelectionError, UsageError
from hybridprof.planner.module_tree import (
    Typed,
    module_at,
    named_modules,
    select_targets,
    walk,
)


class Leafy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Mid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.leafy = Leafy()
        self.leafy.back = self  # a grandchild that refers back to its parent

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.leafy(x)


class Cyclic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.child = Leafy()
        self.mid = Mid()
        self.child.root = self  # a child that refers back to the root

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mid(self.child(x))


def test_a_cycle_is_walked_once_and_the_back_edge_is_an_alias() -> None:
    nodes = {node.path: node.aliases for node in walk(Cyclic())}
    assert nodes == {
        "": ("child.root",),
        "child": (),
        "child.fc": (),
        "mid": ("mid.leafy.back",),
        "mid.leafy": (),
        "mid.leafy.fc": (),
    }
    paths = [path for path, _ in named_modules(Cyclic())]
    assert paths == ["", "child", "child.fc", "child.root", "mid", "mid.leafy", "mid.leafy.fc",
                     "mid.leafy.back"]  # fmt: skip


def test_a_cycle_selects_by_its_alias_and_resolves_paths() -> None:
    model = Cyclic()
    chosen = [t.path for t in select_targets(model, paths=["child.root"]) if t.selected]
    assert chosen == [""]
    assert module_at(model, "mid.leafy.back") is model.mid


def test_torchprof_traces_of_a_cycle_end() -> None:
    traces = [".".join(t.path[1:]) for t in module_traces(Cyclic())]
    assert traces == ["", "child", "child.fc", "child.root", "mid", "mid.leafy", "mid.leafy.fc",
                      "mid.leafy.back"]  # fmt: skip


class DottedChild(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential()
        self.a.add_module("b", nn.Linear(2, 2))
        self._modules["a.b"] = nn.Linear(2, 2)  # torch's add_module would refuse this name


def test_a_child_name_with_a_dot_is_refused_naming_it() -> None:
    with pytest.raises(UsageError, match=r"registered under the name 'a\.b'.*rename the module"):
        select_targets(DottedChild())


def test_an_empty_child_name_is_refused() -> None:
    model = nn.Sequential()
    model._modules[""] = nn.Linear(2, 2)
    with pytest.raises(UsageError, match="tell apart from its parent"):
        walk(model)


def test_a_surrogate_in_a_module_name_is_refused_as_the_name_not_the_forward() -> None:
    model = nn.Sequential()
    model.add_module("lin\ud800", nn.Linear(2, 2))
    with pytest.raises(UsageError) as caught:
        select_targets(model)
    message = str(caught.value)
    assert "named 'lin\\ud800', which is not valid text" in message
    message.encode("utf-8")  # the message itself can be printed


def test_a_surrogate_in_a_class_module_name_is_refused() -> None:
    odd = type("Odd", (nn.Linear,), {"__module__": "made\udfff"})  # Python takes it here
    model = nn.Sequential(odd(2, 2))
    with pytest.raises(UsageError, match=r"class of '0' is named 'made\\udfff\.Odd'"):
        select_targets(model)


ODD_NAMES = ["a,b", "x[0]", " lead", "trail ", "mid space"]


class OddNames(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for name in ODD_NAMES:
            self.add_module(name, nn.Linear(2, 2))
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_name_typed_exactly_selects_that_module(name: str) -> None:
    chosen = [t.path for t in select_targets(OddNames(), paths=[Typed(name)]) if t.selected]
    assert chosen == [name]


def test_typed_values_still_split_on_commas_and_glob() -> None:
    chosen = [t.path for t in select_targets(OddNames(), paths=[Typed("a, b")]) if t.selected]
    assert chosen == ["a", "b"]
    chosen = [t.path for t in select_targets(OddNames(), paths=[Typed("x*")]) if t.selected]
    assert chosen == ["x[0]"]


def test_a_suggestion_is_never_what_was_typed_and_can_be_typed() -> None:
    with pytest.raises(SelectionError) as caught:
        select_targets(OddNames(), paths=[Typed("trail")])
    assert "did you mean: 'trail '" in str(caught.value)  # quoted: its edge space shows
    with pytest.raises(SelectionError) as caught:
        select_targets(OddNames(), paths=["lead"])
    assert "did you mean: ' lead'" in str(caught.value)
