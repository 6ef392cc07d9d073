"""The fixed run behind `hybridprof.profile()` and `hybridprof run`: one model, warm-up and measured
iterations on its inputs (one lane of the iteration loop, `iteration_loop.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.errors import UsageError
from hybridprof.runtime.runs.iteration_loop import IterationLoop
from hybridprof.runtime.runs.lanes import LaneModel, make_lane
from hybridprof.runtime.runs.options import ProgressFn, RunOptions, StepFn


def run(
    model: nn.Module,
    inputs: Any,
    plan: ProfilePlan,
    opts: RunOptions,
    *,
    warnings: Sequence[str] = (),
    progress: ProgressFn | None = None,
    step: StepFn | None = None,
) -> ProfileSession:
    """Warm-up and measured iterations of `model` on `inputs` under a checked `plan`.

    The inputs move to `opts.device`, and so does the model for the run if it is elsewhere (it is
    moved back after); without a device, to the model's own device. The model is left exactly as it
    was. `warnings` (from checking the plan) go into the session; `step` replaces the forward (or
    the training step with `opts.backward`).
    """
    rule = opts.check()
    if opts.backward and not torch.is_grad_enabled():
        raise UsageError(
            "backward=True inside torch.no_grad() or torch.inference_mode(): gradients are off, "
            "so there is no backward to profile; call profile() outside that block"
        )
    strategy = opts.strategy_for(plan)
    given = LaneModel(model, inputs, plan, opts.model_file, opts.model_hash, step, trace=True)
    lane = make_lane(given, opts, strategy)
    (session,) = IterationLoop([lane], opts, rule, progress=progress).run(warnings)
    return session


__all__ = ["run"]
