"""Statistics of per-iteration times: medians, their confidence intervals, and spread (no torch).

The confidence interval of a median is the distribution-free order-statistic interval: for n sorted
values x(1) <= ... <= x(n), the interval [x(k), x(n-k+1)] contains the true median with probability
1 - 2 * P(B <= k-1), B ~ Binomial(n, 1/2), whatever the distribution of the values (they only need
to be independent draws of one distribution). k is the largest rank whose coverage still reaches the
confidence asked for. Timings are skewed (a few slow iterations) and far from normal, which is why
this interval is used rather than a mean +- t * s. It needs at least 6 values for 95%
(with 5, [min, max] covers only 93.75%); below that there is no interval.

Used by the runtime (`--iters auto` stops when the median iteration time's interval is narrow
enough) and by the reporters (each layer's `84.2us ±3%`). Per-iteration values of two runs, kept in
the sessions, are what a comparison of runs needs too.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
CI_METHOD = "a distribution-free order-statistic interval: binomial ranks"


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval of a median: [low, high] around `median`, with its actual coverage."""

    median: float
    low: float
    high: float
    coverage: float  # probability that [low, high] holds the true median (>= the confidence asked)

    def half_width_pct(self) -> float:
        """The larger distance from the median to a bound, in % of the median (inf for a 0 median).

        The interval need not be symmetric; quoting its wider side as `±x%` never overstates the
        precision.
        """
        if self.median <= 0:
            return math.inf
        return 100.0 * max(self.median - self.low, self.high - self.median) / self.median


def median_or_zero(values: Sequence[float]) -> float:
    """The median of `values`; 0 when there are none (no iteration kept that figure)."""
    return float(statistics.median(values)) if values else 0.0


def median_int(values: Sequence[float]) -> int:
    """The median rounded to a whole number (half to even, as `round` does); 0 when empty."""
    return round(median_or_zero(values))


@functools.lru_cache(maxsize=512)
@functools.cache  # a 1,000-layer table asks it 2,000 times, of a few n
def median_ci_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float] | None:
    """The 1-based rank k of the interval's lower bound for n values, and its coverage.

    None when even [min, max] (k = 1, coverage 1 - 2 / 2**n) falls short of `confidence`. The
    binomial terms are summed in log space, so n in the thousands stays cheap and exact enough.
    """
    if n < 1:
        return None
    alpha_half = (1.0 - confidence) / 2.0
    log_half_n = -n * math.log(2.0)
    tail = 0.0  # P(B <= k - 1)
    best: tuple[int, float] | None = None
    for k in range(1, n // 2 + 2):
        tail += math.exp(_log_comb(n, k - 1) + log_half_n)
        if tail > alpha_half + 1e-15:
            break
        best = (k, 1.0 - 2.0 * tail)
    return best


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The median of `values` with its order-statistic confidence interval; None when too few."""
    rank = median_ci_rank(len(values), confidence)
    if rank is None:
        return None
    k, coverage = rank
    ordered = sorted(values)
    return Interval(_median_of_sorted(ordered), ordered[k - 1], ordered[len(ordered) - k], coverage)


def _median_of_sorted(ordered: Sequence[float]) -> float:
    """The median of values already in order (`statistics.median` would sort them again: a
    1,000-layer session's table takes 2,000 intervals)."""
    half = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[half])
    return (ordered[half - 1] + ordered[half]) / 2.0


def min_values_for_ci(confidence: float = CONFIDENCE) -> int:
    """The fewest values that give an interval at `confidence` (6 for 95%)."""
    n = 1
    while median_ci_rank(n, confidence) is None:
        n += 1
    return n


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean; 0.0 for fewer than two values or a zero mean."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    if mean <= 0:
        return 0.0
    return statistics.stdev(values) / mean


def ci_within(values: Sequence[float], pct: float, confidence: float = CONFIDENCE) -> bool:
    """True when the median's confidence interval is within ±pct % of the median."""
    interval = median_ci(values, confidence)
    return interval is not None and interval.half_width_pct() <= pct


def still_falling(times: Sequence[float], tolerance: float = 0.03) -> bool:
    """Are iteration times still coming down (a warm-up should go on)?

    The best of the last two is compared with the best of all before them: falling while it is more
    than `tolerance` below. Taking the best (not the last) keeps one slow, noisy iteration from
    ending or prolonging the warm-up. Fewer than three times: still falling (too early to tell).
    """
    if len(times) < 3:
        return True
    return min(times[-2:]) < (1.0 - tolerance) * min(times[:-2])


__all__ = [
    "CI_METHOD",
    "CONFIDENCE",
    "Interval",
    "ci_within",
    "coefficient_of_variation",
    "median_ci",
    "median_ci_rank",
    "median_or_zero",
    "min_values_for_ci",
    "still_falling",
]
