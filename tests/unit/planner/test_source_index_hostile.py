"""Planner regressions found by QA on real model code (each a small inline source)."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

from hybridprof.datamodel import ModuleClassInfo
from hybridprof.planner.live_plan import plan_model
from hybridprof.planner.source_index import clear_cache, index_source


def analyze(source: str, name: str) -> ModuleClassInfo:
    clear_cache()
    index = index_source(textwrap.dedent(source), "snippet.py")
    (line,) = index.classes_named(name)
    return index.analyze([line], "snippet")[line]


@pytest.mark.parametrize(
    "loop",
    [
        "for m in self.children():",
        "for _, m in self.named_children():",
        "for i, m in enumerate(self.children()):",
    ],
)
def test_calling_a_child_from_self_children_is_a_child_call_not_an_inline_op(loop: str) -> None:
    # add_module-built models walk `self.children()`; `m(x)` was reported as an inline op "m"
    # ("Net.forward runs 1 op(s) directly (m)") and told the user to select the parent.
    info = analyze(
        f"""
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.add_module("a", nn.Linear(2, 2))

            def forward(self, x):
                {loop}
                    x = m(x)
                return x
        """,
        "Net",
    )
    assert [op.name for op in info.inline_ops] == []
    assert [(c.name, c.via) for c in info.calls] == [("*", "children")]


class ChildrenNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.add_module("<img src=x onerror=alert(1)>", nn.Linear(4, 4))
        self.add_module("b", nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.children():
            x = m(x)
        return x


def test_plan_of_a_children_loop_has_no_inline_op_finding_and_unknown_counts() -> None:
    plan = plan_model(ChildrenNet())
    assert [f for f in plan.findings if f.kind == "inline_ops"] == []
    counts = {t.path: t.expected_calls for t in plan.targets if t.path}
    assert counts == {"<img src=x onerror=alert(1)>": None, "b": None}  # which one: unknown


def test_logger_calls_in_forward_are_no_inline_ops() -> None:
    # transformers' BertSdpaSelfAttention calls `logger.warning_once(...)`: it was listed as an op
    info = analyze(
        """
        import logging
        import torch
        from torch import nn

        logger = logging.getLogger(__name__)

        class Net(nn.Module):
            def forward(self, x):
                if x.dim() > 3:
                    logger.warning_once("odd input")
                    logger.warning("odd input")
                return torch.relu(x)
        """,
        "Net",
    )
    assert [op.name for op in info.inline_ops] == ["torch.relu"]


def test_building_a_result_object_in_forward_is_no_inline_op() -> None:
    # a model returning a dataclass (`return Out(logits, hidden)`) or making a transformers cache
    # was told its forward "runs 1 op(s) directly (Out)"; torch's classes still count
    info = analyze(
        """
        import dataclasses
        import torch
        from torch import nn
        from transformers.cache_utils import DynamicCache

        @dataclasses.dataclass
        class Out:
            logits: torch.Tensor

        class Net(nn.Module):
            def forward(self, x):
                cache = DynamicCache()
                y = nn.ReLU()(x)
                return Out(y)
        """,
        "Net",
    )
    assert [op.name for op in info.inline_ops] == ["torch.nn.ReLU"]
