"""Judging two runs measured in pairs (`hybridprof diff --run`): per-pair ratios (no torch).

In a paired run (`runtime.runs.interleaved`) the i-th measured iteration of base and of new ran
back to back, in ABBA order, so whatever the machine did at that moment (another process, the clock
frequency, the caches) hit both. The ratio new / base of one pair is then free of the drift between
pairs, and the question "did the layer get slower?" is asked of those ratios: their median, with
the distribution-free order-statistic interval of the median (`hybridprof.analysis.stats`), in log
space so that 2x slower and 2x faster weigh alike. With the two sides alternating, swapping base
and new turns each ratio into its inverse, so for an unchanged model the ratios spread evenly
around 1 and that interval holds 1 with its confidence, whatever the machine did.

The gate fails when any one figure is slower, so each interval is taken at 1 - 5%/m confidence
for the m figures that can fail it (each layer's self times and the whole iteration; Bonferroni):
then all of them hold together with 95%, and an unchanged model fails the gate 1 time in 20 at
most, however many layers it has. With 30 pairs and 20 figures each interval runs from the 7th to
the 24th ratio, instead of the 10th to the 21st.

The verdict is `judge`'s, on the change that median ratio says (base median x (ratio - 1)) and on
the interval in microseconds; there is no run-wide shift to take out: pairing took it out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hybridprof.analysis.stats import CONFIDENCE, median_ci, median_or_zero
from hybridprof.datamodel import ProfileSession
from hybridprof.diff.judge import judge, plain_change
from hybridprof.diff.result import Change, PairedRatio

PAIRED_METHOD = (
    "paired: base and new measured in one process, iterations interleaved (ABBA); per figure the "
    "median over pairs of new/base with its distribution-free order-statistic interval (binomial "
    "ranks), each at 1 - 5%/m confidence for the m figures that can fail the gate, so that all "
    "hold together with 95%; slower/faster only when the interval excludes 1 and the change "
    "reaches the threshold and the min-delta floor; inconclusive when the interval is wider than "
    "the threshold and reaches a regression beyond both"
)


def paired_ratio(
    base: Sequence[float], new: Sequence[float], confidence: float = CONFIDENCE
) -> PairedRatio | None:
    """The median of new[i] / base[i] over the pairs where both are positive, with its interval;
    None when too few pairs are left for one."""
    logs = [math.log(n / b) for b, n in zip(base, new, strict=False) if b > 0 and n > 0]
    interval = median_ci(logs, confidence)
    if interval is None:
        return None
    return PairedRatio(
        math.exp(interval.median),
        math.exp(interval.low),
        math.exp(interval.high),
        len(logs),
        round(confidence, 6),
    )


def family_confidence(figures: int, confidence: float = CONFIDENCE) -> float:
    """The confidence of each of `figures` intervals such that all of them hold together with
    `confidence` (Bonferroni): the gate fails when any one figure is slower, so with 20 layers at
    95% each it would cry wolf on an unchanged model far more often than 1 time in 20."""
    return 1.0 - (1.0 - confidence) / max(figures, 1)


def paired_change(
    quantity: str,
    base: Sequence[float] | None,
    new: Sequence[float] | None,
    threshold_pct: float,
    min_delta_us: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Change:
    """One figure of two paired runs (equally long series, pair i = base[i], new[i]) with its
    verdict, judged on the interval at `confidence`; the medians and their plain delta are shown
    as for separate runs."""
    plain = plain_change(
        quantity, median_or_zero(base) if base else None, median_or_zero(new) if new else None
    )
    if not base or not new:
        return plain
    ratio = paired_ratio(base, new, confidence)
    if ratio is None:
        return plain
    scale = plain.base or 0.0
    low, high = scale * (ratio.low - 1.0), scale * (ratio.high - 1.0)
    verdict = judge(scale * (ratio.ratio - 1.0), low, high, scale, threshold_pct, min_delta_us)
    return Change(
        quantity,
        plain.base,
        plain.new,
        plain.delta,
        plain.ratio,
        low,
        high,
        verdict,
        None,
        ratio,
    )


def unpaired_reason(base: ProfileSession, new: ProfileSession) -> str | None:
    """Why two sessions cannot be judged pair by pair (None: they can)."""
    if base.iterations != new.iterations:
        return (
            f"the runs hold {base.iterations} and {new.iterations} measured iterations, so "
            "they cannot be paired"
        )
    if not base.iteration_cpu_us or not new.iteration_cpu_us:
        return "the runs hold no per-iteration times to pair"
    if paired_ratio(base.iteration_cpu_us, new.iteration_cpu_us) is None:
        return (
            f"{base.iterations} pair(s) are too few for an interval (6 or more needed: give "
            "--iters 6 or more, or --iters auto)"
        )
    return None


__all__ = [
    "PAIRED_METHOD",
    "family_confidence",
    "paired_change",
    "paired_ratio",
    "unpaired_reason",
]
