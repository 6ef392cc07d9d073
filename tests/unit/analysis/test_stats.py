"""The statistics behind every interval and `--iters auto`: exact figures, no torch."""

from __future__ import annotations

import math
import random

import pytest

from hybridprof.analysis.stats import (
    Interval,
    ci_within,
    coefficient_of_variation,
    median_ci,
    median_ci_rank,
    min_values_for_ci,
    still_falling,
)


def exact_rank(n: int, confidence: float = 0.95) -> tuple[int, float] | None:
    """The same ranks from exact integer binomial sums (slow, so only for small n)."""
    best = None
    for k in range(1, n // 2 + 2):
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1 - 2 * tail < confidence:
            break
        best = (k, 1 - 2 * tail)
    return best


@pytest.mark.parametrize(
    "n, rank, coverage",
    [
        (6, 1, 0.96875),
        (10, 2, 0.978515625),
        (20, 6, 0.9586105),
        (30, 10, 0.9572261),
        (100, 40, 0.9648),
    ],
)
def test_ranks_match_the_published_table(n: int, rank: int, coverage: float) -> None:
    got = median_ci_rank(n)
    assert got is not None
    assert got[0] == rank
    assert got[1] == pytest.approx(coverage, abs=1e-4)


def test_ranks_match_exact_binomial_sums() -> None:
    for n in range(1, 80):
        got, want = median_ci_rank(n), exact_rank(n)
        assert (got is None) == (want is None), n
        if got is not None and want is not None:
            assert got[0] == want[0], n
            assert got[1] == pytest.approx(want[1], abs=1e-9)


def test_five_values_give_no_95_percent_interval() -> None:
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert min_values_for_ci() == 6
    assert min_values_for_ci(0.9) == 5


def test_interval_takes_order_statistics() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # unsorted on purpose
    interval = median_ci(values)
    assert interval == Interval(10.5, 6.0, 15.0, pytest.approx(0.9586, abs=1e-4))


def test_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    hits = 0
    trials = 2000
    for _ in range(trials):
        sample = [rng.lognormvariate(0.0, 0.5) for _ in range(15)]  # true median 1.0, skewed
        interval = median_ci(sample)
        assert interval is not None
        hits += interval.low <= 1.0 <= interval.high
    assert 0.95 <= hits / trials <= 0.995  # coverage for n=15 is 0.9648


def test_half_width_is_the_wider_side_in_percent() -> None:
    assert Interval(100.0, 97.0, 110.0, 0.96).half_width_pct() == pytest.approx(10.0)
    assert Interval(100.0, 90.0, 101.0, 0.96).half_width_pct() == pytest.approx(10.0)
    assert Interval(0.0, 0.0, 1.0, 0.96).half_width_pct() == math.inf


def test_ci_within_needs_enough_values_and_a_narrow_interval() -> None:
    steady = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    assert ci_within(steady, 3.0)
    assert not ci_within(steady[:5], 3.0)  # five values: no 95% interval yet
    assert not ci_within([100.0, 150.0, 60.0, 120.0, 80.0, 140.0], 3.0)


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([]) == 0.0
    assert coefficient_of_variation([5.0]) == 0.0
    assert coefficient_of_variation([10.0, 10.0, 10.0]) == 0.0
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


@pytest.mark.parametrize(
    "times, falling",
    [
        ([100.0, 20.0], True),  # too early to tell
        ([100.0, 20.0, 20.5], True),  # the last two are far below the first
        ([100.0, 20.0, 20.5, 20.2], False),  # settled
        ([100.0, 20.0, 25.0, 19.0], True),  # a new low 5% under the earlier best
        ([20.0, 40.0, 21.0], False),  # a slow outlier does not count as falling
    ],
)
def test_still_falling(times: list[float], falling: bool) -> None:
    assert still_falling(times) is falling
