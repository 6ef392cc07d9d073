"""plan_model on small live models, the static-only plan, and plan compatibility warnings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import ModelLoadError, SelectionError
from hybridprof.planner.live_plan import plan_model
from hybridprof.planner.plan_check import check_plan_compat
from hybridprof.planner.static_plan import static_plan
from tests.paths import FIXTURES


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.head = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.repeat = nn.Linear(4, 4)
        self.maybe = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)
        self.alias = self.maybe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = F.relu(block(x))
        for _ in range(3):
            x = self.repeat(x)
        if x.sum() > 0:
            x = self.maybe(x)
        return self.head(x)


def by_path(plan: ProfilePlan) -> dict[str, tuple[bool, int | None]]:
    return {t.path: (t.selected, t.expected_calls) for t in plan.targets}


def kinds(plan: ProfilePlan, path: str) -> set[str]:
    return {f.kind for f in plan.findings if f.path == path}


def test_expected_calls_per_forward() -> None:
    plan = plan_model(Net())
    got = by_path(plan)
    assert got["blocks.0"] == (True, 1) and got["blocks.1"] == (True, 1)
    assert got["head.0"] == (True, 1) and got["head.1"] == (True, 1)
    assert got["repeat"] == (True, None)
    assert got["maybe"] == (True, None)
    assert got["unused"] == (True, 0)


def test_findings_name_the_paths() -> None:
    plan = plan_model(Net())
    assert kinds(plan, "repeat") == {"loop_call"}
    assert kinds(plan, "maybe") == {"branch_call", "alias"}
    assert kinds(plan, "unused") == {"never_called"}
    assert kinds(plan, "") == {"inline_ops"}
    assert "blocks" not in {f.path for f in plan.findings}  # a ModuleList is never called itself


def test_sources_point_at_init_lines() -> None:
    plan = plan_model(Net())
    source = plan.target("head.1").source  # type: ignore[union-attr]
    assert source is not None and source.file == __file__
    line = Path(__file__).read_text().splitlines()[source.line - 1]
    assert "self.head = nn.Sequential" in line


def test_with_parents_selects_owners_of_inline_ops() -> None:
    plain = plan_model(Net(), leaves_only=True)
    plan = plan_model(Net(), leaves_only=True, with_parents=True)
    assert not plain.target("").selected  # type: ignore[union-attr]
    root = plan.target("")
    assert root is not None and root.selected and "inline ops" in root.reason


def test_multihead_attention_out_proj_is_never_called() -> None:
    model = nn.Sequential(nn.MultiheadAttention(8, 2))
    plan = plan_model(model)
    assert by_path(plan)["0.out_proj"] == (True, 0)
    assert "never_called" in kinds(plan, "0.out_proj")


def test_unreadable_class_is_a_finding() -> None:
    made = type(
        "Made",
        (nn.Module,),
        {
            "__init__": lambda self: (
                nn.Module.__init__(self),
                setattr(self, "fc", nn.Linear(2, 2)),
            )[0],
            "forward": lambda self, x: self.fc(x),
        },
    )
    plan = plan_model(made())
    assert "no_source" in kinds(plan, "")
    assert by_path(plan)["fc"] == (True, None)


def test_class_from_another_file() -> None:
    import sys

    sys.path.insert(0, str(FIXTURES))
    try:
        import layers_lib
    finally:
        sys.path.remove(str(FIXTURES))
    plan = plan_model(nn.Sequential(layers_lib.Residual(2)))
    body = plan.target("0.body")
    assert body is not None and body.expected_calls == 1
    assert body.source is not None and body.source.file.endswith("layers_lib.py")
    assert by_path(plan)["0.body.0"] == (True, 1)  # ConvBNAct is a Sequential: each entry once


def test_selection_errors_list_close_matches() -> None:
    with pytest.raises(SelectionError, match="head"):
        plan_model(Net(), paths=["haed"])


def test_plan_round_trips_through_json() -> None:
    plan = plan_model(Net(), globs=["blocks.*"])
    assert ProfilePlan.from_json(plan.to_json()) == plan
    assert plan.selected_paths() == ("blocks.0", "blocks.1")


def test_static_plan_executes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = (FIXTURES / "tiny_transformer.py").read_text()
    model_file = tmp_path / "guarded.py"
    source = source.replace("from __future__ import annotations\n", "")
    model_file.write_text(f"open({str(marker)!r}, 'w').close()\n" + source)
    plan = static_plan(model_file)
    assert not marker.exists()
    assert plan.static_only and plan.root_class == "TinyTransformer"
    got = by_path(plan)
    assert got["blocks.*.mlp.fc1"] == (True, 1)
    assert got["head.proj"] == (True, 1)
    assert got["dropout"] == (True, 0)


def test_static_plan_root_falls_back_to_last_module_class() -> None:
    # conv3x3 exists but builds no class of the file: the root is a guess, and the plan says so
    plan = static_plan(FIXTURES / "resnet_like.py", entry="conv3x3")
    assert plan.root_class == "TinyResNet"
    assert "last" in plan.findings[0].message


def test_static_plan_refuses_an_entry_the_file_does_not_define() -> None:
    # `run --plan` would call it and fail; the plan is refused instead of guessing a root
    with pytest.raises(ModelLoadError, match=r"entry 'no_such_entry' not found in resnet_like\.py"):
        static_plan(FIXTURES / "resnet_like.py", entry="no_such_entry")


def test_check_plan_compat_warns_on_other_torch() -> None:
    plan = plan_model(nn.Linear(2, 2))
    assert check_plan_compat(plan) == []
    older = dataclasses.replace(plan, torch_version="1.13.1")
    assert any("1.13.1" in w for w in check_plan_compat(older))
