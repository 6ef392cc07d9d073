"""Hints that are true: what the planner says about loops over containers, parents with inline ops
and `--depth` on a container, on small models written here (their source is read as a user's is)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from hybridprof.datamodel import FindingKind, ProfilePlan
from hybridprof.planner.live_plan import plan_model
from hybridprof.planner.static_plan import static_plan


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x)  # the `+` is the block's own op


class GptStyle(nn.Module):
    """The loops of GPT-2, BERT and Whisper: enumerate, zip, enumerate(zip(...)), len."""

    def __init__(self) -> None:
        super().__init__()
        self.h = nn.ModuleList([Block() for _ in range(2)])
        self.extra = nn.ModuleList([Block() for _ in range(2)])
        self.layers = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self.h):
            x = block(x) * (i + 1)
        for block, scale in zip(self.extra, (1.0, 2.0), strict=True):
            x = block(x) * scale
        for _, (layer, _scale) in enumerate(zip(self.layers, range(len(self.layers)), strict=True)):
            x = layer(x)
        return x


def _findings(plan: ProfilePlan, kind: FindingKind) -> dict[str, str]:
    return {f.path: f.message for f in plan.findings if f.kind == kind}


def test_a_loop_over_a_module_list_is_a_loop_not_a_branch() -> None:
    plan = plan_model(GptStyle())
    branches = _findings(plan, FindingKind.BRANCH_CALL)
    assert branches == {}, branches  # enumerate(self.h) passes h to enumerate: it runs nothing
    expected = {t.path: t.expected_calls for t in plan.targets}
    for path in ("h.0", "h.1", "extra.0", "extra.1", "layers.0", "layers.1"):
        assert expected[path] == 1, path  # each entry once per forward


def test_inline_ops_say_what_is_left_to_do() -> None:
    # by default the parents are selected: their rows hold their own ops' time
    default = _findings(plan_model(GptStyle()), FindingKind.INLINE_OPS)
    assert default and all("select it too" not in m for m in default.values()), default
    assert all("its own row" in m for m in default.values())
    # torchprof's selection leaves them out: that is when selecting them helps
    leaves = _findings(plan_model(GptStyle(), leaves_only=True), FindingKind.INLINE_OPS)
    assert leaves["h.0"].endswith("select it too (--with-parents, or --paths 'h.0')")
    # and once --with-parents selected them, nothing is left to do
    parents = plan_model(GptStyle(), leaves_only=True, with_parents=True)
    assert all(
        "select it too" not in m for m in _findings(parents, FindingKind.INLINE_OPS).values()
    )
    assert {t.path for t in parents.targets if t.selected} >= {"h.0", "h.1"}


def test_the_static_planner_says_the_same(tmp_path: Path) -> None:
    model_file = tmp_path / "net.py"
    model_file.write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n        return x + self.fc(x)\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = nn.ModuleList([Block() for _ in range(2)])\n\n"
        "    def forward(self, x):\n"
        "        for i, block in enumerate(self.blocks):\n            x = block(x)\n"
        "        return x\n\n\n"
        "def build_model():\n    return Net()\n"
    )
    plan = static_plan(model_file)
    inline = _findings(plan, FindingKind.INLINE_OPS)
    assert inline and all("select it too" not in m for m in inline.values())
    assert _findings(plan, FindingKind.BRANCH_CALL) == {}
    leaves = _findings(static_plan(model_file, leaves_only=True), FindingKind.INLINE_OPS)
    assert all("select it too" in m for m in leaves.values())


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.layers = nn.ModuleList([Block() for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.ModuleList([nn.Linear(8, 2)]), "b": nn.Linear(8, 2)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.heads["a"][0](x) + self.heads["b"](x)


def test_depth_on_a_container_selects_its_entries() -> None:
    plan = plan_model(Stack(), depth=1)
    selected = {t.path: t.reason for t in plan.targets if t.selected}
    assert set(selected) == {"embed", "layers.0", "layers.1", "layers.2", "heads.a.0", "heads.b"}
    assert selected["layers.0"] == "depth 1, in place of layers (ModuleList, which never runs)"
    assert "layers" not in selected and "heads" not in selected


def test_a_container_named_by_path_selects_its_entries() -> None:
    plan = plan_model(Stack(), paths=["layers"])
    assert {t.path for t in plan.targets if t.selected} == {"layers.0", "layers.1", "layers.2"}


def test_depth_on_a_container_leaves_nothing_outside_the_rows() -> None:
    from hybridprof.api import profile

    session = profile(Stack(), torch.randn(2, 4), warmup=0, iters=2, depth=1)
    assert session.never_called == ()
    layers = sum(r.self_cpu_us.median for r in session.records if r.path.startswith("layers."))
    assert layers > 0
