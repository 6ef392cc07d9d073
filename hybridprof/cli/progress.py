"""The progress bar `hybridprof run` shows on stderr: warm-up, then the measured iterations.

It draws only when stderr is a terminal, so logs, pipes and CI output get no control characters.
"""

from __future__ import annotations

import sys
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

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
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
        if self._progress is None:
            return
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(
                PHASE_LABELS.get(phase, phase), total=total
            )
        self._progress.update(task, completed=done)

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
