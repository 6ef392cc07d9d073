"""One figure's change between two runs, judged against noise: the interval of the difference
of medians from both runs' per-iteration values, beyond the run-wide shift when given.

Four answers (`judge`): slower or faster when the interval excludes 0 and the change reaches both
the threshold and the min-delta floor; inconclusive when the interval is wider than the threshold
and its upper end still reaches a regression beyond both (more iterations, or a quieter machine,
would tell); else within noise. The same rule judges paired runs (`hybridprof.diff.pair_ratios`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hybridprof.analysis.stats import CONFIDENCE, median_ci, median_or_zero
from hybridprof.diff.result import Change, DiffVerdict
from hybridprof.diff.shift import RunShift

_PER_RUN_CONFIDENCE = math.sqrt(CONFIDENCE)


def diff_series(
    quantity: str,
    base: Sequence[float] | None,
    new: Sequence[float] | None,
    threshold_pct: float,
    shift: RunShift | None = None,
    min_delta_us: float = 0.0,
) -> Change:
    """One figure's change with the interval of its difference of medians and its verdict,
    judged beyond `shift` when given (the base run scaled by it); a change under `min_delta_us`
    is never slower or faster."""
    base_median = median_or_zero(base) if base else None
    new_median = median_or_zero(new) if new else None
    plain = plain_change(quantity, base_median, new_median)
    if not base or not new:
        return plain
    base_ci = median_ci(base, _PER_RUN_CONFIDENCE)
    new_ci = median_ci(new, _PER_RUN_CONFIDENCE)
    if base_ci is None or new_ci is None:
        return plain
    # The shift's point estimate scales the base run. Its own interval is not added: over a
    # handful of layers an order-statistic interval spans the layers themselves, changed ones too.
    factor = shift.factor if shift is not None else 1.0
    low = new_ci.low - base_ci.high * factor
    high = new_ci.high - base_ci.low * factor
    expected = (base_median or 0.0) * factor
    # Beyond a shift, a move within the layers' own scatter around it is no change either.
    needed = max(threshold_pct, shift.band_pct()) if shift is not None else threshold_pct
    verdict = judge((new_median or 0.0) - expected, low, high, expected, needed, min_delta_us)
    return Change(
        quantity,
        base_median,
        new_median,
        plain.delta,
        plain.ratio,
        low,
        high,
        verdict,
        shift.factor if shift is not None else None,
    )


def judge(
    delta: float,
    low: float,
    high: float,
    base_median: float,
    threshold_pct: float,
    min_delta_us: float = 0.0,
) -> DiffVerdict:
    """Slower/faster only when the interval [low, high] of the change excludes 0 and the change
    reaches the threshold and the floor; inconclusive when the interval is wider than the
    threshold and reaches a regression beyond both; else within noise."""
    needed = threshold_pct / 100.0 * abs(base_median)
    big_enough = abs(delta) >= needed and abs(delta) >= min_delta_us
    if low > 0 and delta > 0 and big_enough:
        return "slower"
    if high < 0 and delta < 0 and big_enough:
        return "faster"
    if high - low > needed and high >= max(needed, min_delta_us):
        return "inconclusive"
    return "within noise"


def plain_change(quantity: str, base: float | None, new: float | None) -> Change:
    delta = (new or 0.0) - (base or 0.0)
    ratio = (new or 0.0) / base if base else None
    return Change(quantity, base, new, delta, ratio)
