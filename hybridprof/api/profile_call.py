"""`hybridprof.profile()`: profile a model on some inputs and get a `ProfileSession` back."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.diff.speedup import SpeedupResult
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import Selector, tree_plan
from hybridprof.planner.plan_check import checked_plan
from hybridprof.runtime.runs.compile_setup import compiled_for_run
from hybridprof.runtime.runs.fixed import run
from hybridprof.runtime.runs.options import ProgressFn, RunOptions
from hybridprof.runtime.strategies import DEFAULT_STRATEGY


def profile(
    model: nn.Module,
    inputs: Any,
    *,
    plan: ProfilePlan | None = None,
    paths: Sequence[Selector] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    leaves_only: bool = False,
    options: RunOptions | None = None,
    progress: ProgressFn | None = None,
    compile: bool = False,
    compile_mode: str | None = None,
    compare_eager: bool = False,
    **option_fields: Any,
) -> ProfileSession | SpeedupResult:
    """Profile `model` on `inputs` (a tensor, a tuple of args, a dict of kwargs or `ModelInputs`).

    Options go in `options` or as keywords (`warmup=3, iters=20, backward=True, ...`, see
    `RunOptions`). `plan` (from `hybridprof analyze`) fixes the selected paths; otherwise `paths`,
    `globs` and `depth` select; by default every module that runs a forward is profiled, so the
    rows (and the session's `outside_cpu_us`) add up to the whole iteration, and `leaves_only=True`
    selects the leaves alone, as torchprof did. The inputs (and the model, moved back after) go
    to `device`, else to the model's own; the model is left exactly as it was. torch runs on one
    thread unless `threads=N` (the caller's setting put back after), so the figures do not depend
    on the load; `environment.threads` is the count the model ran with.

    Compiled code (`torch.compile(model)`, `model.compile()`, compiled children) is measured from
    its kernels, in the caller's grad mode, so the model is not compiled again afterwards.
    `compile=True` (or a `compile_mode`) profiles hybridprof's own `torch.compile` of it (the
    model left eager); `compare_eager=True` measures eager and compiled as a paired run (ABBA,
    judged pair by pair; `iters="auto"` until every speed-up is decided) and returns a
    `SpeedupResult` (both sessions, their diff, per-layer speed-ups) instead of a session.
    """
    check_option_names(option_fields)
    opts = replace(options or RunOptions(), **option_fields)
    opts.check()
    warnings: list[str] = []
    plan = _plan_of(model, plan, Selection(paths, globs, depth, leaves_only), opts, warnings)
    setup = compiled_for_run(
        model, compile or compile_mode is not None, compile_mode, compare_eager
    )
    if setup is None:
        return run(model, inputs, plan, opts, warnings=warnings, progress=progress)
    opts = replace(opts, compiled_by_hybridprof=setup.by_hybridprof)
    if compare_eager:
        return setup.measure_speedup(inputs, plan, opts, progress)
    return run(
        setup.model, inputs, plan, opts, warnings=warnings, progress=progress, step=setup.step(opts)
    )


@dataclass(frozen=True, slots=True)
class Selection:
    """What `profile()` was asked to select, when no plan fixes it."""

    paths: Sequence[Selector] | None
    globs: Sequence[str]
    depth: int | None
    leaves_only: bool


def _plan_of(
    model: nn.Module,
    plan: ProfilePlan | None,
    selection: Selection,
    opts: RunOptions,
    warnings: list[str],
) -> ProfilePlan:
    """The plan given, checked against the model (it comes from outside: what it says of the
    model is noted in `warnings`), or the selection's plan."""
    if plan is not None:
        return checked_plan(plan, model, probe(), warnings)
    strategy = opts.strategy or DEFAULT_STRATEGY
    return tree_plan(
        model,
        selection.paths,
        selection.globs,
        selection.depth,
        strategy=strategy,
        leaves_only=selection.leaves_only,
    )


def check_option_names(given: Mapping[str, Any]) -> None:
    """A keyword `profile()` does not take is a TypeError naming the one meant (`iter` ->
    `iters`), not RunOptions' own error, which names a class the caller never wrote."""
    known = [f.name for f in fields(RunOptions)]
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = (
                f"did you mean '{close[0]}'?" if close else f"it takes {', '.join(known[:8])}, ..."
            )
            raise TypeError(
                f"profile() got an unexpected keyword argument '{name}'; {hint} "
                "(see help(hybridprof.profile) and RunOptions)"
            )
