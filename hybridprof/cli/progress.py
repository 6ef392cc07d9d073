"""The progress bar `hybridprof run` shows on stderr: warm-up, then the measured iterations.

It draws only when stderr is a terminal, so logs, pipes and CI output get no control characters.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

PHASE_LABELS = {"warmup": "warm-up (not measured)", "measure": "profiling"}


def wanted(stream: TextIO | None = None) -> bool:
    """Draw a bar only on a terminal."""
    target = sys.stderr if stream is None else stream
    isatty = getattr(target, "isatty", None)
    return bool(isatty and isatty())


class ProgressBar:
    """A `ProgressFn` (phase, done, total) drawing one bar per phase; a no-op when `enabled` is
    False."""

    def __init__(
        self, enabled: bool, stream: TextIO | None = None, compiling: str | None = None
    ) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._stream = sys.stderr if stream is None else stream
        self._compiling = compiling  # what compiles, e.g. "blocks (inductor)"
        self._compile_started = 0.0
        if enabled:
            console = Console(file=sys.stderr if stream is None else stream)
            self._progress = Progress(
                TextColumn("{task.description:<24}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("elapsed"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=console,
                transient=True,  # the tree table replaces it when done
            )

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        """total None: decided as the run goes (auto); rich then draws a pulsing bar."""
        if phase == "compile":
            self._compile_line(done)
            return
        if self._progress is None:
            return
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(
                PHASE_LABELS.get(phase, phase), total=total
            )
        self._progress.update(task, completed=done)

    def _compile_line(self, done: int) -> None:
        """A line as compiling starts and one when warm-up is over, bar or no bar (a log shows
        a minute of silence otherwise)."""
        what = self._compiling or "the compiled code"
        if done == 0:
            self._compile_started = time.perf_counter()
            line = f"compiling {what} in warm-up (the first calls compile) ..."
        else:
            seconds = time.perf_counter() - self._compile_started
            line = f"compiled {what}: warm-up took {seconds:.1f} s"
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self._stream, flush=True)

    def __enter__(self) -> ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
