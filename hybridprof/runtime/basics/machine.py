"""How busy the machine is while a model runs: the figures `hybridprof.analysis.stability` judges.

Between iterations (never inside one) the driver counts the tasks the kernel has runnable (the 4th
field of /proc/loadavg) and takes away this process's own running threads: what is left is other
work competing for the cores right then. Their mean over the run says more than the 1-minute load
average, which lags a minute behind; that average is still recorded, divided by the cores. Where
/proc cannot be read (not Linux), only the load average is known.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hybridprof.analysis.stability import assess
from hybridprof.datamodel import Stability


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def runnable_others() -> int | None:
    """Runnable tasks on the machine now, minus this process's own running threads."""
    try:
        fields = Path("/proc/loadavg").read_text(encoding="ascii").split()
        runnable = int(fields[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(runnable - _own_running_threads(), 0)


def _own_running_threads() -> int:
    running = 0
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return 1  # at least the thread reading this
    for task in tasks:
        try:
            stat = (task / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # the thread ended meanwhile
        # The state follows the command name in parentheses, which may itself hold spaces.
        state = stat.rpartition(")")[2].split()[:1]
        running += state == ["R"]
    return max(running, 1)


@dataclass
class LoadWatch:
    """Samples other runnable work between iterations; the load average when the watch began."""

    load_average: float | None = field(default_factory=load_average)
    samples: list[int] = field(default_factory=list)

    def sample(self) -> None:
        count = runnable_others()
        if count is not None:
            self.samples.append(count)

    def other_runnable(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None

    def stability(
        self, iteration_us: Sequence[float], threads: int | None = None, iters_auto: bool = False
    ) -> Stability:
        """The verdict on a run whose whole-iteration times were `iteration_us`."""
        return assess(
            iteration_us,
            threads=torch.get_num_threads() if threads is None else threads,
            cores=usable_cores(),
            load_average=self.load_average,
            other_runnable=self.other_runnable(),
            iters_auto=iters_auto,
        )


__all__ = ["LoadWatch", "load_average", "runnable_others", "usable_cores"]
