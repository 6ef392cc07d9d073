"""Time stolen by the scheduler is not a layer's time: the measured iterations that waited for a
CPU (`basics/cpu_wait.py`) are excluded and measured again.

An iteration whose thread waited, runnable, for more than `LOST_SHARE_PCT` % of its step time
(and at least `MIN_LOST_US`) holds another process's time in whichever layer was running when the
core was taken away: on two cores shared with two busy processes, one child of each block read a
scheduler slice (+4 ms) more in every iteration, a different child each time. Such an iteration is
dropped (in a paired run, its whole pair) and one more is measured, up to as many extra iterations
as were asked for (`--iters auto`: `AUTO_EXTRA`), within the run's time limit; past that limit
iterations are kept as they are, and the session says how many still lost time. The session
records each kept iteration's wait, and the line the run prints says what was taken out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hybridprof.datamodel import CpuWaits
from hybridprof.runtime.basics.cpu_wait import SOURCE
from hybridprof.runtime.basics.stopping import Count

LOST_SHARE_PCT = 2.0  # an iteration that waited more than this % of its step is excluded
MIN_LOST_US = 10.0  # and at least this much (a timer tick's worth on a quiet machine is less)
AUTO_EXTRA = 20  # the most extra iterations of an `--iters auto` run


def stolen(wait_us: float, step_us: float) -> bool:
    """Did an iteration that waited `wait_us` in a step of `step_us` lose time to others?"""
    return wait_us > max(MIN_LOST_US, LOST_SHARE_PCT / 100 * step_us)


@dataclass
class StolenTime:
    """Which measured rounds (an iteration, or a pair) were excluded for time lost to others."""

    lanes: int
    extra: int  # the most rounds excluded
    excluded: int = 0
    lost_us: list[float] = field(default_factory=list)  # per lane: what the excluded rounds lost
    kept_over: int = 0

    @classmethod
    def of(cls, lanes: int, iters: Count) -> StolenTime:
        extra = iters if isinstance(iters, int) else AUTO_EXTRA
        return cls(lanes, extra, lost_us=[0.0] * lanes)

    def exclude(self, waits_us: Sequence[float | None], steps_us: Sequence[float]) -> bool:
        """Should a round whose lanes waited `waits_us` be measured again? (counted when so)"""
        if not any(w is not None and stolen(w, s) for w, s in zip(waits_us, steps_us, strict=True)):
            return False
        if self.excluded >= self.extra:
            self.kept_over += 1
            return False
        self.excluded += 1
        for lane, wait in enumerate(waits_us):
            self.lost_us[lane] += wait or 0.0
        return True

    def waits(self, lane: int, kept_wait_us: Sequence[float | None]) -> CpuWaits | None:
        """Lane `lane`'s record of its waits (None where the OS does not say)."""
        if not kept_wait_us or any(w is None for w in kept_wait_us):
            return None
        return CpuWaits(
            source=SOURCE,
            threshold_pct=LOST_SHARE_PCT,
            excluded=self.excluded,
            excluded_wait_us=round(self.lost_us[lane], 3),
            kept_wait_us=tuple(round(w or 0.0, 3) for w in kept_wait_us),
            kept_over=self.kept_over,
        )


def waits_line(waits: CpuWaits | None, kept: int, unit: str = "iterations") -> str | None:
    """`3 of 23 measured iterations lost 4.1 ms to other processes; excluded` (and what was kept
    all the same); None when nothing was lost."""
    if waits is None or not (waits.excluded or waits.kept_over):
        return None
    parts: list[str] = []
    if waits.excluded:
        lost = _ms(waits.excluded_wait_us)
        parts.append(
            f"{waits.excluded} of {kept + waits.excluded} measured {unit} lost {lost} to other "
            "processes; excluded"
        )
    if waits.kept_over:
        parts.append(
            f"{waits.kept_over} kept {unit} lost time too ({_ms(sum(waits.kept_wait_us))} in "
            "all kept), past the limit of extra iterations: stop background jobs"
        )
    return "; ".join(parts)


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 100 else f"{us:.0f} us"


__all__ = ["AUTO_EXTRA", "LOST_SHARE_PCT", "MIN_LOST_US", "StolenTime", "stolen", "waits_line"]
