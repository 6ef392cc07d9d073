"""Names resolved through a file's imports, without libcst's scope analysis; the bound on the
source read (issue 25: M-14)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import ScopeProvider

from hybridprof.datamodel import ChildCall, ModuleClassInfo
from hybridprof.errors import UsageError
from hybridprof.planner.live_plan import matching_calls
from hybridprof.planner.source_index import (
    MAX_SOURCE_CHARS,
    SourceTooBig,
    class_info,
    clear_cache,
    index_source,
)
from hybridprof.planner.static_names import ImportNames, local_names, top_level_names
from hybridprof.planner.static_plan import static_plan

SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn as tnn
    import torch.nn.functional
    from torch import nn
    from torch.nn import Linear as L
    from .layers import Block
    from . import helpers
    try:
        from apex import FusedNorm
    except ImportError:
        from torch.nn import LayerNorm as FusedNorm
    from somewhere import *

    def max(a, b):
        return a

    class Net(nn.Module):
        def forward(self, input, F=None):
            import numpy as np
            x = y = input
            for item in range(3):
                pass
            return x
    """
)


@pytest.fixture(scope="module")
def names() -> ImportNames:
    module = cst.parse_module(SOURCE)
    return ImportNames(module.body, top_level_names(module))


def expression(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("torch.cat", "torch.cat"),
        ("tnn.Linear", "torch.nn.Linear"),
        ("torch.nn.functional.relu", "torch.nn.functional.relu"),
        ("nn.ReLU", "torch.nn.ReLU"),
        ("nn.ReLU()", "torch.nn.ReLU"),  # a call stands for what it calls, as in libcst
        ("L", "torch.nn.Linear"),
        ("Block", ".layers.Block"),  # relative: made absolute by the caller's package
        ("helpers.f", ".helpers.f"),
        ("FusedNorm", "apex.FusedNorm"),  # two imports bind it: the first in sorted order
        ("getattr", "builtins.getattr"),
        ("dict.fromkeys", "builtins.dict.fromkeys"),
        ("np.zeros", "numpy.zeros"),  # imported inside a method
        ("max", None),  # the file's own function hides the builtin
        ("x.relu", None),  # a local name
        ("(-x).mean", None),  # an expression
        ("Star", None),  # what `import *` binds is not in the source
    ],
)
def test_names_resolve_through_the_imports(names: ImportNames, text: str, resolved) -> None:
    assert names.resolve(expression(text)) == resolved


def test_a_functions_own_names_hide_imports_and_builtins(names: ImportNames) -> None:
    module = cst.parse_module(SOURCE)
    forward = next(s for s in module.body if isinstance(s, cst.ClassDef)).body.body[0]
    assert isinstance(forward, cst.FunctionDef)
    local = local_names(forward)
    assert local == {"self", "input", "F", "x", "y", "item"}  # np is imported: not local
    assert names.resolve(expression("input.flatten"), local) is None
    assert names.resolve(expression("F.relu"), local) is None
    assert names.resolve(expression("input"), ()) == "builtins.input"


def test_planning_a_class_runs_no_scope_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    # libcst's scope analysis costs the square of a name's assignments in one scope: 4,000
    # `x = self.layer_i(x)` took 44 s and 870 MB; the planner must not start it
    def refuse(*_: object) -> None:
        raise AssertionError("libcst's ScopeProvider ran")

    monkeypatch.setattr(ScopeProvider, "visit_Module", refuse)
    clear_cache()
    from torch import nn

    info = class_info(nn.TransformerEncoderLayer)
    assert info.note == "" and {c.name for c in info.calls} >= {"self_attn", "linear1"}


def test_calls_are_found_by_name_and_pattern_in_source_order() -> None:
    calls = (
        ChildCall("layers.*", 10, "loop", True, False),
        ChildCall("head", 11, "attr", False, False),
        ChildCall("layers.0", 12, "index", False, False),
        ChildCall("head", 13, "attr", False, True),
    )
    info = ModuleClassInfo(qualname="Net", span=None, calls=calls)
    assert [c.line for c in matching_calls(info, "layers.0")] == [10, 12]
    assert [c.line for c in matching_calls(info, "head")] == [11, 13]
    assert matching_calls(info, "tail") == []


def test_a_source_over_the_bound_is_not_read(tmp_path: Path) -> None:
    big = "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)
    with pytest.raises(SourceTooBig, match=r"is 1\.0 MB of source, over the 1 MB hybridprof"):
        index_source(big, "big.py")
    model = tmp_path / "big.py"
    model.write_text("from torch import nn\nclass Net(nn.Module):\n    pass\n" + big)
    with pytest.raises(UsageError, match="so --static-only cannot plan it; analyze without"):
        static_plan(model, "Net")


def test_a_class_in_a_file_over_the_bound_is_planned_without_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    model = tmp_path / "huge_model_file.py"
    filler = "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)
    model.write_text("from torch import nn\n\nclass Huge(nn.Module):\n    pass\n\n" + filler)
    monkeypatch.syspath_prepend(str(tmp_path))
    huge = importlib.import_module("huge_model_file")
    info = class_info(huge.Huge)
    assert info.note.startswith("source not read: ") and "over the 1 MB" in info.note
