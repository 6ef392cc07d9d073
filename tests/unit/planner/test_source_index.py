"""Static facts from libcst, one per test, on inline dedented sources (LibCST's own test style)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from hybridprof.datamodel import ModuleClassInfo
from hybridprof.planner.source_index import class_info, clear_cache, index_source


def analyze(source: str, name: str) -> ModuleClassInfo:
    """The info of class `name` in `source` (a fresh parse each time)."""
    clear_cache()
    index = index_source(textwrap.dedent(source), "snippet.py")
    (line,) = index.classes_named(name)
    return index.analyze([line], "snippet")[line]


def children(info: ModuleClassInfo) -> dict[str, tuple[str, str | None]]:
    return {c.name: (c.kind, c.class_name) for c in info.children}


def calls(info: ModuleClassInfo) -> dict[str, tuple[str, bool, bool]]:
    return {c.name: (c.via, c.in_loop, c.in_branch) for c in info.calls}


HEADER = """
    import torch
    import torch.nn as tnn
    from torch import nn
    from torch.nn import Linear as L
    import torch.nn.functional as F
"""


@pytest.mark.parametrize(
    ("expression", "resolved"),
    [
        ("tnn.Linear(2, 2)", "torch.nn.Linear"),
        ("nn.Conv2d(1, 1, 1)", "torch.nn.Conv2d"),
        ("L(2, 2)", "torch.nn.Linear"),
        ("torch.nn.ReLU()", "torch.nn.ReLU"),
    ],
)
def test_aliased_imports_resolve_to_torch_names(expression: str, resolved: str) -> None:
    info = analyze(
        HEADER
        + f"""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = {expression}
    """,
        "Net",
    )
    assert children(info) == {"layer": ("attr", resolved)}


def test_a_local_class_named_like_torch_is_not_torch() -> None:
    info = analyze(
        """
    from torch import nn
    class Linear(nn.Module):
        pass
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = Linear()
    """,
        "Net",
    )
    assert children(info)["layer"][1] == "Linear"


def test_child_lines_are_real_file_lines() -> None:
    source = (
        HEADER
        + "\n\n\n    class Net(nn.Module):\n        def __init__(self):\n"
        + ("            super().__init__()\n            self.fc = L(1, 1)\n")
    )
    info = analyze(source, "Net")
    expected = textwrap.dedent(source).splitlines().index("        self.fc = L(1, 1)") + 1
    assert info.children[0].span.line == expected
    assert info.span is not None
    assert textwrap.dedent(source).splitlines()[info.span.line - 1].startswith("class Net")


def test_containers_list_their_entries() -> None:
    info = analyze(
        HEADER
        + """
    from collections import OrderedDict
    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.seq = nn.Sequential(nn.Linear(4, 4), tnn.ReLU())
            self.named = nn.Sequential(OrderedDict([("a", nn.ReLU()), ("b", nn.Tanh())]))
            self.blocks = nn.ModuleList([nn.Linear(1, 1) for _ in range(n)])
            self.pair = nn.ModuleList([nn.ReLU(), nn.GELU()])
            self.heads = nn.ModuleDict({"x": nn.ReLU(), "y": nn.GELU()})
    """,
        "Net",
    )
    got = children(info)
    assert got["seq.0"] == ("sequential", "torch.nn.Linear")
    assert got["seq.1"] == ("sequential", "torch.nn.ReLU")
    assert got["named.b"] == ("sequential", "torch.nn.Tanh")
    assert got["blocks.*"] == ("loop", "torch.nn.Linear")
    assert got["pair.1"] == ("modulelist", "torch.nn.GELU")
    assert got["heads.y"] == ("moduledict", "torch.nn.GELU")


def test_add_module_setattr_and_loops() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module("extra", nn.Identity())
            setattr(self, "other", nn.Identity())
            for i in range(3):
                self.add_module(f"stage{i}", nn.Linear(2, 2))
            self.scale = 0.5
            self.weight = nn.Parameter(torch.zeros(3))
            self.register_buffer("buf", torch.zeros(1))
    """,
        "Net",
    )
    assert children(info) == {
        "extra": ("add_module", "torch.nn.Identity"),
        "other": ("setattr", "torch.nn.Identity"),
        "stage*": ("loop", "torch.nn.Linear"),
    }


def test_forward_calls_loop_branch_getattr_index() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def forward(self, x):
            x = self.first(x)
            for layer in self.layers:
                x = layer(x)
            for _ in range(2):
                x = self.repeated(x)
            if x.sum() > 0:
                x = self.maybe(x)
            x = getattr(self, "dynamic")(x)
            x = self.pair[1](x)
            return self.heads["y"](x)
    """,
        "Net",
    )
    assert calls(info) == {
        "first": ("attr", False, False),
        "layers.*": ("loop", False, False),
        "repeated": ("attr", True, False),
        "maybe": ("attr", False, True),
        "dynamic": ("getattr", False, False),
        "pair.1": ("index", False, False),
        "heads.y": ("index", False, False),
    }


def test_loop_variable_call_inside_another_loop_repeats() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def forward(self, x):
            for _ in range(2):
                for block in self.blocks:
                    x = block(x)
            return [head(x) for head in self.heads]
    """,
        "Net",
    )
    assert calls(info) == {"blocks.*": ("loop", True, False), "heads.*": ("loop", False, False)}


def test_helper_methods_are_followed_and_never_called_children_absent() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(2, 2)
            self.unused = nn.Linear(2, 2)
        def _impl(self, x):
            return self.body(x)
        def forward(self, x):
            return self._impl(x) @ self.unused.weight
    """,
        "Net",
    )
    assert calls(info) == {"body": ("attr", False, False)}
    assert "unused" in children(info)


def test_inline_ops_functional_tensor_methods_and_operators() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def forward(self, x, y):
            assert x.dim() == 2, "%d dims" % x.dim()
            z = F.relu(self.fc(x)) + torch.flatten(y, 1)
            n = len(z)
            return z.view(n, -1) @ y
    """,
        "Net",
    )
    assert [op.name for op in info.inline_ops] == [
        "+",
        "torch.nn.functional.relu",
        "torch.flatten",
        "@",
        ".view",
    ]


def test_shared_child_under_two_names() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            shared = L(3, 3)
            self.a = shared
            self.b = shared
    """,
        "Net",
    )
    assert children(info) == {"a": ("attr", "torch.nn.Linear"), "b": ("attr", "torch.nn.Linear")}


def test_child_passed_as_argument_is_a_maybe_call() -> None:
    info = analyze(
        HEADER
        + """
    from torch.utils.checkpoint import checkpoint
    class Net(nn.Module):
        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)
    """,
        "Net",
    )
    assert calls(info) == {"block": ("arg", False, True)}


def test_torch_multihead_attention_source_never_calls_out_proj() -> None:
    info = class_info(torch.nn.MultiheadAttention)
    assert info.note == ""
    assert info.span is not None and info.span.file.endswith("activation.py")
    assert "out_proj" in {c.name for c in info.children}
    assert "out_proj" not in {c.name for c in info.calls}
    assert any(
        op.name == "torch.nn.functional.multi_head_attention_forward" for op in info.inline_ops
    )


def test_builtin_containers_are_understood_without_source() -> None:
    info = class_info(torch.nn.Sequential)
    assert info.builtin and info.qualname == "torch.nn.Sequential"


def test_unreadable_source_is_a_note_not_a_crash() -> None:
    made = type("Made", (torch.nn.Module,), {"forward": lambda self, x: x})
    info = class_info(made)
    assert info.note.startswith("source not readable")
    assert info.span is None


def test_each_file_is_parsed_once() -> None:
    clear_cache()
    source = HEADER + "\n    class A(nn.Module):\n        pass\n"
    first = index_source(textwrap.dedent(source), "same.py")
    assert index_source(textwrap.dedent(source), "same.py") is first
    assert index_source(textwrap.dedent(source) + "\n", "same.py") is not first


def test_a_child_made_in_a_conditional_expression_has_its_line() -> None:
    info = analyze(
        HEADER
        + """
    class Net(nn.Module):
        def __init__(self, wide=True):
            super().__init__()
            self.act = nn.GELU() if wide else nn.ReLU()
            self.norm = None if wide else nn.LayerNorm(4)
    """,
        "Net",
    )
    assert children(info) == {
        "act": ("attr", "torch.nn.GELU"),
        "norm": ("attr", "torch.nn.LayerNorm"),
    }
    act = next(c for c in info.children if c.name == "act")
    assert act.span is not None and act.span.line == 11  # the assignment's line, not "-"
