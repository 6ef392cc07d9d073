"""Fresh copies of tests/fixtures/compiled_models.py, and dynamo's counters: for the compiled
tests."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from types import ModuleType

FILE = Path(__file__).resolve().parent / "fixtures" / "compiled_models.py"
_COUNT = itertools.count()


def fresh() -> ModuleType:
    """The fixture file imported anew: its classes' code is compiled by dynamo afresh."""
    name = f"compiled_models_{next(_COUNT)}"
    spec = importlib.util.spec_from_file_location(name, FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def break_line() -> int:
    """The line of the deliberate graph break in the fixture file."""
    lines = FILE.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if "# BREAK" in line)


def counters() -> tuple[int, int, int, int]:
    """dynamo's frames, unique graphs, graph breaks and recompiles so far."""
    import torch._dynamo.utils as utils

    recompiles = sum(1 for m in utils.get_compilation_metrics() if m.recompile_reason)
    return (
        utils.counters["frames"]["total"],
        utils.counters["stats"]["unique_graphs"],
        sum(utils.counters["graph_break"].values()),
        recompiles,
    )


def delta(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(a - b for a, b in zip(after, before, strict=True))
