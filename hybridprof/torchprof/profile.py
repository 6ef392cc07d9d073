"""torchprof's `profile` module: `Profile`, `Trace` and `walk_modules`, on hybridprof."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from torch import nn

from hybridprof.api.profiler import Profile as _Profile
from hybridprof.api.profiler import Trace
from hybridprof.datamodel import ProfilePlan
from hybridprof.planner.module_tree import Selector, partition_selectors


class Profile(_Profile):
    """torchprof's `Profile(model, enabled, use_cuda, profile_memory, paths)` (the default
    strategy). A `paths` entry that names no module is ignored with a warning, as torchprof
    ignored it, so one list of paths can be reused across models."""

    def __init__(
        self,
        model: nn.Module,
        enabled: bool = True,
        use_cuda: bool = False,
        profile_memory: bool = False,
        paths: Sequence[Selector] | None = None,
    ) -> None:
        known = None if paths is None else _known_paths(model, paths)
        super().__init__(model, enabled, use_cuda, profile_memory, known or None)
        if known == []:  # torchprof profiled nothing then; an empty selection means leaves here
            self.plan = _nothing_selected(self.plan)
        self.paths = paths


def walk_modules(module: nn.Module, name: str = "", path: tuple[str, ...] = ()) -> Iterator[Trace]:
    """torchprof's generator: a Trace for `module` and, depth first, for every submodule under
    each of its paths; the root is named by its class."""
    if not name:
        name = module.__class__.__name__
    named_children = list(module.named_children())
    path = (*path, name)
    yield Trace(path, len(named_children) == 0, module)
    for child_name, child in named_children:
        yield from walk_modules(child, name=child_name, path=path)


def _known_paths(model: nn.Module, paths: Sequence[Selector]) -> list[Selector]:
    known, unknown = partition_selectors(model, paths)
    for selector, close in unknown:
        warnings.warn(_unknown_message(model, selector, close), UserWarning, stacklevel=3)
    return known


def _unknown_message(model: nn.Module, selector: Selector, close: list[str]) -> str:
    root = type(model).__name__
    shown = [repr(c) if isinstance(selector, str) else repr((root, *c.split("."))) for c in close]
    hint = f"; did you mean {' or '.join(shown)}?" if shown else ""
    return f"torchprof path {_show(selector)} names no module of {root}, ignored{hint}"


def _show(selector: Any) -> str:
    return repr(selector) if isinstance(selector, str) else repr(tuple(selector))


def _nothing_selected(plan: ProfilePlan) -> ProfilePlan:
    targets = tuple(replace(t, selected=False, reason="not selected") for t in plan.targets)
    return replace(plan, targets=targets)


__all__ = ["Profile", "Trace", "walk_modules"]
