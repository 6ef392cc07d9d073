"""`hybridprof.profile()`: profile a model on some inputs and get a `ProfileSession` back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.planner.module_tree import Selector
from hybridprof.runtime.runner import ProgressFn, RunOptions, run_profile


def profile(
    model: nn.Module,
    inputs: Any,
    *,
    plan: ProfilePlan | None = None,
    paths: Sequence[Selector] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    options: RunOptions | None = None,
    progress: ProgressFn | None = None,
    **option_fields: Any,
) -> ProfileSession:
    """Profile `model` on `inputs` (a tensor, a tuple of args, a dict of kwargs or `ModelInputs`).

    Options go in `options` or as keywords (`warmup=3, iters=20, backward=True, ...`, see
    `RunOptions`). `plan` (from `hybridprof analyze`) fixes the selected paths; otherwise `paths`,
    `globs` and `depth` select (leaves by default). The inputs move to `device`, and so does the
    model for the run if it is elsewhere (it is moved back after); without `device`, to the
    model's own device. The model is left
    exactly as it was.
    """
    opts = replace(options or RunOptions(), **option_fields)
    return run_profile(
        model, inputs, opts, plan=plan, paths=paths, globs=globs, depth=depth, progress=progress
    )
