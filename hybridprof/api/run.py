"""`hybridprof.profile()`: profile a model on some inputs and get a `ProfileSession` back."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.diff.speedup import SpeedupResult as CompileComparison
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import Selector, tree_plan
from hybridprof.planner.plan_check import checked_plan
from hybridprof.runtime.compiled.setup import compiled_for_run
from hybridprof.runtime.driver import ProgressFn, RunOptions, run
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
) -> ProfileSession | CompileComparison:
    """Profile `model` on `inputs` (a tensor, a tuple of args, a dict of kwargs or `ModelInputs`).

    Options go in `options` or as keywords (`warmup=3, iters=20, backward=True, ...`, see
    `RunOptions`). `plan` (from `hybridprof analyze`) fixes the selected paths; otherwise `paths`,
    `globs` and `depth` select; by default every module that runs a forward is profiled, so the
    rows (and the session's `outside_cpu_us`) add up to the whole iteration, and `leaves_only=True`
    selects the leaves alone, as torchprof did. The inputs move to `device`, and so does the
    model for the run if it is elsewhere (it is moved back after); without `device`, to the
    model's own device. The model is left
    exactly as it was.

    Compiled code (`torch.compile(model)`, `model.compile()`, compiled children) is measured from
    its kernels, in the caller's grad mode, so the model is not compiled again afterwards.
    `compile=True` (or a `compile_mode`) profiles hybridprof's own `torch.compile` of the model
    (the model itself is left eager); `compare_eager=True` runs eager and compiled iterations
    interleaved and returns a `CompileComparison` (both sessions, their diff, per-layer speed-ups)
    instead of a session.
    """
    check_option_names(option_fields)
    opts = replace(options or RunOptions(), **option_fields)
    opts.check()
    warnings: list[str] = []
    if plan is None:
        strategy = opts.strategy or DEFAULT_STRATEGY
        plan = tree_plan(model, paths, globs, depth, strategy=strategy, leaves_only=leaves_only)
    else:
        plan = checked_plan(plan, model, probe(), warnings)  # it comes from outside: check it
    setup = compiled_for_run(
        model, compile or compile_mode is not None, compile_mode, compare_eager
    )
    if setup is None:
        return run(model, inputs, plan, opts, warnings=warnings, progress=progress)
    opts = replace(opts, compiled_by_hybridprof=setup.by_hybridprof)
    if compare_eager:
        return setup.compare(inputs, plan, opts)
    return run(
        setup.model, inputs, plan, opts, warnings=warnings, progress=progress, step=setup.step(opts)
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
