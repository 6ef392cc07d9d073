"""How long this thread waited for a CPU while it was runnable: time the scheduler gave its core to
other processes, which a wall-clock timer would put into whichever layer was running.

On Linux the kernel counts it per thread: the second field of `/proc/thread-self/schedstat` is
the nanoseconds the thread spent runnable on a run queue, not running. The file is opened once
and read with `os.pread` (about 2 us a read), so reading it at every iteration's boundaries costs
nothing measurable. `/proc/thread-self` names the thread that opens it: the clock must be opened
on the thread that runs the steps. Elsewhere (no schedstat: other systems, kernels without
schedstats) the clock is unavailable and the run says nothing about waits.

Only the calling thread is covered: torch's intra-op worker threads wait too when there are more
than one, which is one reason the runs default to one thread.
"""

from __future__ import annotations

import contextlib
import os

SCHEDSTAT = "/proc/thread-self/schedstat"
SOURCE = "schedstat"  # what the session records as the waits' source


class WaitClock:
    """Nanoseconds this thread has waited for a CPU so far (`read()`), or None where unknown."""

    def __init__(self, path: str = SCHEDSTAT) -> None:
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(path, os.O_RDONLY)
        if self._fd is not None and self.read() is None:
            self.close()  # present but unreadable or of another format

    @classmethod
    def closed(cls) -> WaitClock:
        """A clock that reads nothing (before a run begins)."""
        return cls(path="")

    @property
    def available(self) -> bool:
        return self._fd is not None

    def read(self) -> int | None:
        """The thread's total run-queue wait in ns (None without the file)."""
        if self._fd is None:
            return None
        try:
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[1])
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


__all__ = ["SCHEDSTAT", "SOURCE", "WaitClock"]
