"""Two models measured in one process with their iterations interleaved: the paired A/B run of
`hybridprof diff --run` (two lanes of the iteration loop, in ABBA order: `iteration_loop.py`).

Each side (a `LaneModel`: model, inputs, plan, file) is a lane of its own (its plan, strategy,
patches and load watch); the session strategy opens one profiler session per iteration, so the
two never overlap. `hybridprof.diff` then judges
each layer on its per-pair ratios (`diff_sessions(..., paired=True)`).
"""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.diff import Floor, diff_sessions
from hybridprof.runtime.runs.iteration_loop import IterationLoop, SettledFn
from hybridprof.runtime.runs.lanes import LaneModel, make_lane
from hybridprof.runtime.runs.options import ProgressFn, RunOptions


def run_paired(
    base: LaneModel,
    new: LaneModel,
    opts: RunOptions,
    *,
    settled: SettledFn | None = None,
    progress: ProgressFn | None = None,
) -> tuple[ProfileSession, ProfileSession]:
    """Warm up and measure `base` and `new` in alternation (ABBA); their two sessions, whose
    i-th measured iterations were taken back to back. `opts.iters` counts pairs; with "auto" the
    run stops once `settled` (both sessions so far) is true, or at the time limit."""
    rule = opts.check()
    strategy = opts.strategy_for(base.plan)
    lanes = [make_lane(side, opts, strategy) for side in (base, new)]
    loop = IterationLoop(lanes, opts, rule, settled=settled, progress=progress)
    base_session, new_session = loop.run()
    return base_session, new_session


def decided(threshold_pct: float, floor: Floor | None = None) -> SettledFn:
    """The `settled` test of a paired run with auto counts: every figure of the paired diff is
    decided (no layer, and not the whole iteration, is inconclusive) at `threshold_pct` and the
    min-delta `floor` (None: the default one)."""

    def settled(base: ProfileSession, new: ProfileSession) -> bool:
        found = diff_sessions(base, new, threshold_pct, floor=floor, paired=True)
        undecided = found.undecided() or found.total.verdict == "inconclusive"
        return found.gate_answer() != "inconclusive" and not undecided

    return settled


__all__ = ["decided", "run_paired"]
