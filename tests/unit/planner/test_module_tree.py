"""Module tree walking and selection on small real models."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.errors import SelectionError
from hybridprof.examples import alexnet
from hybridprof.planner.module_tree import module_at, select_targets, tree_plan


class Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.again = self.block  # the same object under a second path
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.again(self.block(x)))


def selected(targets) -> list[str]:
    return [t.path for t in targets if t.selected]


def test_leaves_selected_with_leaves_only_in_named_modules_order() -> None:
    targets = select_targets(alexnet(), leaves_only=True)
    assert targets[0].path == "" and targets[0].depth == 0 and not targets[0].is_leaf
    leaves = selected(targets)
    assert leaves[:2] == ["features.0", "features.1"]
    assert leaves[-1] == "classifier.6" and "avgpool" in leaves and len(leaves) == 21
    conv = next(t for t in targets if t.path == "features.0")
    assert conv.class_name == "Conv2d" and conv.qualname == "torch.nn.modules.conv.Conv2d"
    assert conv.param_count == 64 * 3 * 11 * 11 + 64 and conv.depth == 2 and conv.reason == "leaf"
    features = next(t for t in targets if t.path == "features")
    assert features.param_count == 0 and features.reason.startswith("not a leaf")


def test_every_module_that_runs_a_forward_is_selected_by_default() -> None:
    class Blocks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
            self.heads = nn.ModuleDict({"a": nn.ReLU()})
            self.seq = nn.Sequential(nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
            return self.seq(self.heads["a"](x))

    targets = {t.path: t for t in select_targets(Blocks())}
    chosen = [p for p, t in targets.items() if t.selected]
    assert chosen == ["", "blocks.0", "blocks.1", "heads.a", "seq", "seq.0"]
    assert not targets["blocks"].has_forward and not targets["heads"].has_forward
    assert "container without a forward" in targets["blocks"].reason
    assert targets[""].reason == "runs its own forward" and targets["seq.0"].reason == "leaf"


def test_dotted_paths_and_torchprof_tuples_select_the_same() -> None:
    model = alexnet()
    by_tuple = select_targets(
        model, paths=[("AlexNet", "features", "0"), ("AlexNet", "classifier")]
    )
    by_dots = select_targets(model, paths=["features.0", "classifier"])
    assert selected(by_tuple) == selected(by_dots) == ["features.0", "classifier"]
    assert selected(select_targets(model, paths=[("AlexNet",)])) == [""]


def test_tuple_with_wrong_root_is_refused() -> None:
    with pytest.raises(SelectionError, match="root class name 'AlexNet'"):
        select_targets(alexnet(), paths=[("VGG", "features", "0")])


def test_globs_and_depth() -> None:
    model = alexnet()
    assert selected(select_targets(model, globs=["classifier.*"])) == [
        f"classifier.{i}" for i in range(7)
    ]
    assert selected(select_targets(model, depth=1)) == ["features", "avgpool", "classifier"]
    assert selected(select_targets(model, depth=0)) == [""]


def test_unknown_path_names_close_matches() -> None:
    with pytest.raises(ValueError, match=r"features\.0"):
        select_targets(alexnet(), paths=["featres.0"])
    with pytest.raises(SelectionError, match="glob"):
        select_targets(alexnet(), globs=["blocks.*"])
    with pytest.raises(SelectionError, match="0 or more"):
        select_targets(alexnet(), depth=-1)


def test_depth_past_the_bottom_keeps_leaves() -> None:
    model = alexnet()
    leaves = selected(select_targets(model, leaves_only=True))
    assert selected(select_targets(model, depth=9)) == leaves


def test_shared_module_has_one_canonical_path_and_aliases() -> None:
    targets = select_targets(Shared())
    paths = [t.path for t in targets]
    assert "again" not in paths and "again.0" not in paths
    block = next(t for t in targets if t.path == "block")
    assert block.aliases == ("again",)
    assert next(t for t in targets if t.path == "block.0").aliases == ("again.0",)
    assert selected(select_targets(Shared(), paths=["again.0"])) == ["block.0"]


def test_module_at() -> None:
    model = alexnet()
    assert module_at(model, "") is model
    assert module_at(model, "classifier.1") is model.classifier[1]
    with pytest.raises(SelectionError, match=r"classifier\.1"):
        module_at(model, "classifier.10")


def test_tree_plan_fills_strategy_compat_and_selectors() -> None:
    plan = tree_plan(alexnet(), paths=["features.0"], strategy="per-call")
    assert plan.root_class == "AlexNet" and plan.strategy == "per-call"
    assert plan.selected_paths() == ("features.0",)
    assert plan.compat_value("profiler_device_arg") in ("use_device", "use_cuda")
    assert plan.selectors == ("'features.0'",) and plan.torch_version == torch.__version__
