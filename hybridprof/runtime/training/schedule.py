"""Which steps of a training loop are profiled: `hybridprof.schedule`, torch.profiler's schedule.

    prof = hybridprof.Profile(model, schedule=hybridprof.schedule(wait=5, warmup=3, active=10))

The numbers mean what they mean in `torch.profiler.schedule`: the first `skip_first` steps run
untouched; then steps go in cycles of `wait` untouched steps, `warmup` steps run under the
profiler whose results are thrown away (the profiler's and the model's first-use costs land there),
and `active` measured steps; `repeat` cycles (0: cycles until the block ends); `skip_first_wait`
drops the first cycle's wait. The one difference is `repeat`'s default, 1 rather than torch's 0:
a session is one result, and cycling over a loop of thousands of steps would profile a window
every cycle (with wait 2, warm-up 3, active 10 over 2,000 steps: 1,330 measured steps instead of
10). `repeat=0` still means what it means in torch. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hybridprof.datamodel import ScheduleInfo
from hybridprof.errors import BadValueError

Action = Literal["none", "warmup", "active"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule of steps (see the module docstring); made by `schedule()`, which checks it."""

    wait: int
    warmup: int
    active: int
    repeat: int
    skip_first: int = 0
    skip_first_wait: int = 0

    def action(self, step: int) -> Action:
        """What step `step` (0 for the first) does: nothing, warm up, or get measured."""
        if step < self.skip_first:
            return "none"
        step -= self.skip_first
        if self.skip_first_wait:
            step += self.wait
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step >= self.repeat * cycle:
            return "none"
        within = step % cycle
        if within < self.wait:
            return "none"
        return "warmup" if within < self.wait + self.warmup else "active"

    def info(self) -> ScheduleInfo:
        return ScheduleInfo(
            self.wait, self.warmup, self.active, self.repeat, self.skip_first, self.skip_first_wait
        )


# Every step measured: what a Profile without a schedule does.
EVERY_STEP = Schedule(wait=0, warmup=0, active=1, repeat=0)


def schedule(
    *,
    wait: int = 0,
    warmup: int = 1,
    active: int,
    repeat: int = 1,
    skip_first: int = 0,
    skip_first_wait: int = 0,
) -> Schedule:
    """The steps a `Profile` measures: `skip_first` untouched, then `repeat` cycles (0: until the
    block ends) of `wait` untouched, `warmup` warm-up and `active` measured steps."""
    counts = {
        "wait": (wait, 0),
        "warmup": (warmup, 0),
        "active": (active, 1),
        "repeat": (repeat, 0),
        "skip_first": (skip_first, 0),
        "skip_first_wait": (skip_first_wait, 0),
    }
    for name, (value, least) in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise BadValueError(
                f"hybridprof.schedule({name}={value!r}): {name} must be a whole number of "
                f"steps, {least} or more"
            )
    return Schedule(wait, warmup, active, repeat, skip_first, skip_first_wait)


__all__ = ["EVERY_STEP", "Action", "Schedule", "schedule"]
