"""`--compare-eager` / `compare_eager=True`: the speedup of compiling, measured as a paired run.

The eager model is the base lane and its compiled version the new one of the iteration loop
(`iteration_loop.py`): their measured iterations alternate in ABBA order, warm-up and measured
counts may be "auto" (the pairs go on until every per-pair interval is narrow enough to decide, as
`diff --run`'s do), and the two sessions are judged pair by pair (`diff.speedup`). The two lanes
share their modules (`torch.compile` wraps the user's model), so each is patched only around its
own iterations: the compiled model's guards are evaluated when it is called, and by then the eager
patches are gone, so the eager iterations make it compile nothing. Both run the same step in the
same grad mode on the same inputs; each lane's rows add up to its own iterations (its own
`(outside modules)`).

What the speedup compares is time: neither lane measures per-layer memory (the capture's hooks
sit on the parameters both lanes share) or counts FLOPs, and no trace is written.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan
from hybridprof.diff.speedup import SpeedupResult, speedup_of
from hybridprof.errors import UsageError
from hybridprof.runtime.runs.interleaved import decided
from hybridprof.runtime.runs.iteration_loop import IterationLoop
from hybridprof.runtime.runs.lanes import LaneModel, make_lane
from hybridprof.runtime.runs.options import ProgressFn, RunOptions, StepFn

SPEEDUP_THRESHOLD_PCT = 5.0  # a layer's change that counts as a speed-up or a slow-down


def measure_speedup(
    eager: nn.Module,
    compiled: nn.Module,
    inputs: Any,
    plan: ProfilePlan,
    opts: RunOptions,
    step: StepFn | None = None,
    *,
    threshold_pct: float = SPEEDUP_THRESHOLD_PCT,
    progress: ProgressFn | None = None,
) -> SpeedupResult:
    """Eager and compiled iterations of one model, paired; the two sessions compared. `step`
    replaces the forward (or the training step with `opts.backward`)."""
    opts = replace(opts, profile_memory=False, flops=False, trace_path=None)
    rule = opts.check()
    strategy = opts.strategy_for(plan)
    files = (opts.model_file, opts.model_hash)
    sides = (LaneModel(model, inputs, plan, *files, step) for model in (eager, compiled))
    lanes = [make_lane(side, opts, strategy) for side in sides]
    if lanes[1].compiled is None:
        raise UsageError("--compare-eager needs a compiled model: add --compile")
    settled = decided(threshold_pct)
    loop = IterationLoop(lanes, opts, rule, settled=settled, progress=progress)
    eager_session, compiled_session = loop.run()
    return speedup_of(eager_session, compiled_session, threshold_pct, paired=True)


__all__ = ["SPEEDUP_THRESHOLD_PCT", "measure_speedup"]
