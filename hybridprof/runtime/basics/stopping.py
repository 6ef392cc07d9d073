"""When warm-up ends and when the measured iterations stop (`--warmup auto`, `--iters auto`).

`--iters auto` measures until the median iteration time is known to ±3%: its 95% confidence interval
(the distribution-free order-statistic interval of `hybridprof.analysis.stats`) lies within 3% of
it. That takes at least 5 iterations, and in practice 6, the fewest that give a 95% interval. It
also stops when the time limit runs out (`--max-time`, 30 s by default, counted from the first
warm-up iteration) or after 1,000 iterations, which bound the session file. `--warmup auto` runs
until iteration times stop falling (`analysis.stats.still_falling`), for at most 50 iterations and
half the time limit. Fixed counts run exactly, unless a time limit was given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hybridprof.analysis.stats import ci_within, still_falling
from hybridprof.datamodel import StopReason
from hybridprof.errors import UsageError
from hybridprof.runtime.basics.limits import iterations_problem

Count = int | Literal["auto"]
AUTO: Literal["auto"] = "auto"
AUTO_TARGET_PCT = 3.0
AUTO_MIN_ITERATIONS = 5
AUTO_MAX_ITERATIONS = 1000
AUTO_MAX_WARMUP = 50
DEFAULT_MAX_TIME_S = 30.0


@dataclass(frozen=True, slots=True)
class IterationRule:
    """How many warm-up and measured iterations to run; `max_time_s` None means no time limit."""

    warmup: Count
    iters: Count
    max_time_s: float | None

    @classmethod
    def of(cls, warmup: Count, iters: Count, max_time_s: float | None) -> IterationRule:
        """The rule for these options: auto counts get the default time limit unless one is
        given."""
        _check_count("warm-up iterations", warmup, minimum=0)
        _check_count("iterations", iters, minimum=1)
        if max_time_s is not None and not max_time_s > 0:
            raise UsageError(f"--max-time must be more than 0 seconds, got {max_time_s}")
        if max_time_s is None and AUTO in (warmup, iters):
            max_time_s = DEFAULT_MAX_TIME_S
        return cls(warmup, iters, max_time_s)

    def warmup_total(self) -> int | None:
        """The warm-up count when fixed, None for auto (for progress bars)."""
        return self.warmup if isinstance(self.warmup, int) else None

    def iters_total(self) -> int | None:
        return self.iters if isinstance(self.iters, int) else None

    def warmup_done(self, times_us: Sequence[float], elapsed_s: float) -> bool:
        """After these warm-up iterations (their wall times) and seconds, is warm-up over?"""
        if isinstance(self.warmup, int):
            return len(times_us) >= self.warmup
        if len(times_us) >= AUTO_MAX_WARMUP:
            return True
        if self.max_time_s is not None and elapsed_s >= self.max_time_s / 2:
            return True
        return not still_falling(times_us)

    def stop_reason(
        self, times_us: Sequence[float], elapsed_s: float, *, by_times: bool = True
    ) -> StopReason | None:
        """Why to stop after these measured iterations (their times), or None to go on.
        `by_times=False`: auto counts do not converge on these times (a paired run asks its own
        judge whether it has converged), only the count and the limits stop."""
        done = len(times_us)
        if isinstance(self.iters, int) and done >= self.iters:
            return "count"
        if done >= 1 and self.max_time_s is not None and elapsed_s >= self.max_time_s:
            return "max_time"
        if self.iters == AUTO:
            converged = by_times and done >= AUTO_MIN_ITERATIONS
            if converged and ci_within(times_us, AUTO_TARGET_PCT):
                return "converged"
            if done >= AUTO_MAX_ITERATIONS:
                return "max_iterations"
        return None


def unconverged(reason: StopReason, rule: IterationRule, done: Sequence[object]) -> str | None:
    """The warning for `--iters auto` stopped by a limit before its interval got narrow enough."""
    if reason == "max_time":
        why = f"--max-time {rule.max_time_s:g} s ran out"
    elif reason == "max_iterations":
        why = f"the cap of {len(done)} iterations was reached"
    else:
        return None
    return (
        "--iters auto stopped before the median iteration time was known to "
        f"±{AUTO_TARGET_PCT:g}%: {why}; give a longer --max-time, or steady the machine "
        "(see the stability line)"
    )


def _check_count(what: str, value: Count, minimum: int) -> None:
    if value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{what} must be {minimum} or more, or 'auto'; got {value!r}")
    problem = iterations_problem(value, what)
    if problem:
        raise UsageError(problem)


def parse_count(text: str) -> Count:
    """A command-line count: a whole number or "auto"; ValueError otherwise."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected a whole number or 'auto', got {text!r}") from None


__all__ = [
    "AUTO",
    "AUTO_MAX_ITERATIONS",
    "AUTO_MAX_WARMUP",
    "AUTO_MIN_ITERATIONS",
    "AUTO_TARGET_PCT",
    "DEFAULT_MAX_TIME_S",
    "Count",
    "IterationRule",
    "parse_count",
    "unconverged",
]
