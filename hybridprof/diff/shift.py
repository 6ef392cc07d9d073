"""What moved a whole run, not one layer: the between-run shift, and knock-on changes (no torch).

Each run's confidence intervals describe its own iterations. Two runs made minutes apart can
differ as a whole: another process took a core, the CPU clocked down, the caches were shared
differently. On a busy 2-core machine, two runs of one unchanged model had every layer faster in
the second (figures: benchmarks/README.md, "Measured in passing"). Judged against each run's own
intervals alone, each of those layers
is "faster".

So the comparison first estimates that shift per time figure: the median, over the layers matched
in both runs, of new median / base median (a ratio, so big and small layers count alike; the median,
so a few layers that really changed do not move it), with an order-statistic interval over layers.
Each layer is then judged beyond the shift: is it slower than the rest of the run moved? Layers of
different kinds do not move alike, though: on that busy machine the small LayerNorm and GELU layers
of one run moved about twice as far as its Linears. So the spread of the layers' ratios around the
shift (1.4826 x their median absolute deviation, in log space: a robust standard deviation) sets a
band, SPREAD_K of those wide, within which a layer's move is the runs' own scatter, not a change;
on a quiet machine the band is about the threshold, on a busy one it widens. A change
that slows every layer alike (another dtype, fewer threads) therefore shows in the whole iteration's
figure and in the shift the summary prints, not as every layer slower.

A knock-on change is the other case where a layer moves without a change of its own: a layer after
one that got heavier runs in caches that layer filled (measured without any profiler, stepping both
variants in turn: the ReLU and LayerNorm after a Linear that does 4x the work ran slower).
A slower or faster layer whose own work is identical in both runs (class, calls, parameter count,
input and output shapes, its ops and their call counts) is marked knock-on when some other layer's
own work did change and its change stays under KNOCK_ON_MAX_PCT; reports list it apart from the
regressions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from hybridprof.analysis.stats import CONFIDENCE, median_ci, median_or_zero
from hybridprof.datamodel import ModuleRecord

MIN_SHIFT_LAYERS = 5  # fewer matched layers: no shift is estimated, verdicts stay absolute
SPREAD_K = 3.0  # a layer moving more than 3 robust standard deviations from the shift stands out
_MAD_TO_SD = 1.4826  # the median absolute deviation of normal values, times this, is their sd
KNOCK_ON_MAX_PCT = 50.0  # a bigger change of a layer whose own work is unchanged is its own


@dataclass(frozen=True, slots=True)
class RunShift:
    """How much one time figure of every layer moved together between the runs (new / base)."""

    quantity: str
    factor: float  # the median over layers of new median / base median
    low: float  # its confidence interval over layers (the factor itself with few layers)
    high: float
    layers: int  # how many layers it was estimated from
    spread: float = 0.0  # robust standard deviation of the layers' log ratios around the shift

    def pct(self) -> float:
        return 100.0 * (self.factor - 1.0)

    def band_pct(self) -> float:
        """How far (in percent) a layer may move from the shift and still be the runs' scatter."""
        return 100.0 * (math.exp(SPREAD_K * self.spread) - 1.0)


def estimate_shift(quantity: str, medians: Iterable[tuple[float, float]]) -> RunShift | None:
    """The shift of `quantity` from (base median, new median) pairs; None with too few layers."""
    logs = [math.log(new / base) for base, new in medians if base > 0 and new > 0]
    if len(logs) < MIN_SHIFT_LAYERS:
        return None
    center = median_or_zero(logs)
    interval = median_ci(logs, CONFIDENCE)
    low, high = (interval.low, interval.high) if interval else (center, center)
    spread = _MAD_TO_SD * median_or_zero([abs(v - center) for v in logs])
    return RunShift(quantity, math.exp(center), math.exp(low), math.exp(high), len(logs), spread)


def same_own_work(
    base: ModuleRecord, new: ModuleRecord, base_iterations: int, new_iterations: int
) -> bool:
    """True when a layer did the same work in both runs: the same class, calls per iteration,
    parameters, input and output shapes, and ops with the same calls per iteration."""
    if (base.class_name, base.param_count, base.input_shapes, base.output_shapes) != (
        new.class_name,
        new.param_count,
        new.input_shapes,
        new.output_shapes,
    ):
        return False
    if not _same_rate(base.calls, base_iterations, new.calls, new_iterations):
        return False
    # OpStat.calls are per iteration already.
    base_ops = {(o.name, o.backward): o.calls for o in base.ops}
    new_ops = {(o.name, o.backward): o.calls for o in new.ops}
    return base_ops == new_ops


def _same_rate(base_calls: int, base_iterations: int, new_calls: int, new_iterations: int) -> bool:
    return base_calls * max(new_iterations, 1) == new_calls * max(base_iterations, 1)


__all__ = [
    "KNOCK_ON_MAX_PCT",
    "MIN_SHIFT_LAYERS",
    "SPREAD_K",
    "RunShift",
    "estimate_shift",
    "same_own_work",
]
