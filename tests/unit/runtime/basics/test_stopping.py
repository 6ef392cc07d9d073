"""When warm-up ends and measured iterations stop: fixed counts, auto, and the time limit."""

from __future__ import annotations

import pytest

from hybridprof.errors import UsageError
from hybridprof.runtime.basics.stopping import (
    AUTO_MAX_ITERATIONS,
    AUTO_MAX_WARMUP,
    DEFAULT_MAX_TIME_S,
    IterationRule,
    parse_count,
)

STEADY = [1000.0, 1004.0, 998.0, 1001.0, 999.0, 1002.0, 1000.5]
WILD = [1000.0, 2000.0, 500.0, 1500.0, 700.0, 1800.0, 900.0, 2500.0]


def test_fixed_counts_run_exactly_without_a_time_limit() -> None:
    rule = IterationRule.of(3, 4, None)
    assert rule.max_time_s is None
    assert [rule.warmup_done([1.0] * n, 1e9) for n in range(5)] == [False] * 3 + [True] * 2
    assert rule.stop_reason(WILD[:3], 1e9) is None
    assert rule.stop_reason(WILD[:4], 0.0) == "count"


def test_a_given_time_limit_stops_fixed_counts_too_after_one_iteration() -> None:
    rule = IterationRule.of(0, 100, 2.0)
    assert rule.stop_reason([], 5.0) is None  # nothing measured yet: measure one
    assert rule.stop_reason([1.0], 5.0) == "max_time"


def test_auto_gets_the_default_time_limit() -> None:
    assert IterationRule.of("auto", 20, None).max_time_s == DEFAULT_MAX_TIME_S
    assert IterationRule.of(3, "auto", None).max_time_s == DEFAULT_MAX_TIME_S
    assert IterationRule.of(3, "auto", 5.0).max_time_s == 5.0


def test_auto_iterations_stop_once_the_median_is_known_to_3_percent() -> None:
    rule = IterationRule.of(0, "auto", None)
    assert rule.stop_reason(STEADY[:5], 1.0) is None  # at least 5, and 6 for a 95% interval
    assert rule.stop_reason(STEADY[:6], 1.0) == "converged"


def test_auto_iterations_go_on_while_the_interval_is_wide() -> None:
    rule = IterationRule.of(0, "auto", 10.0)
    assert rule.stop_reason(WILD, 1.0) is None
    assert rule.stop_reason(WILD, 10.0) == "max_time"
    assert rule.stop_reason(WILD * (AUTO_MAX_ITERATIONS // len(WILD) + 1), 1.0) == "max_iterations"


def test_auto_warmup_runs_until_times_stop_falling() -> None:
    rule = IterationRule.of("auto", 10, None)
    times = [50_000.0, 9_000.0, 8_000.0, 7_000.0, 7_050.0, 6_990.0]
    done = [rule.warmup_done(times[:n], 0.1) for n in range(len(times) + 1)]
    # falling through 7,000; the pair (7,050, 6,990) is not 3% under it: done after 6
    assert done == [False, False, False, False, False, False, True]


def test_auto_warmup_is_bounded_by_count_and_half_the_time_limit() -> None:
    rule = IterationRule.of("auto", 10, 8.0)
    falling = [1000.0 / (n + 1) for n in range(AUTO_MAX_WARMUP)]
    assert not rule.warmup_done(falling[:10], 3.9)
    assert rule.warmup_done(falling[:10], 4.0)
    assert rule.warmup_done(falling, 0.0)


@pytest.mark.parametrize(
    "warmup, iters, max_time, message",
    [
        (-1, 5, None, "warm-up iterations must be 0 or more"),
        (0, 0, None, "iterations must be 1 or more"),
        (0, "lots", None, "iterations must be 1 or more, or 'auto'"),
        (0, 5, 0.0, "--max-time must be more than 0"),
    ],
)
def test_bad_counts_are_usage_errors(
    warmup: object, iters: object, max_time: float | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        IterationRule.of(warmup, iters, max_time)  # type: ignore[arg-type]


def test_parse_count() -> None:
    assert parse_count("auto") == "auto"
    assert parse_count("AUTO") == "auto"
    assert parse_count("12") == 12
    with pytest.raises(ValueError, match="whole number or 'auto'"):
        parse_count("1.5")
