"""How the ranks of a torchrun run tell each other that one failed, hung or was stopped.

Everything goes through torchrun's own store (a TCPStore at MASTER_ADDR:MASTER_PORT), read by a
watcher thread on every rank, every 0.2 s:

- a rank that fails posts its one-line error; every other rank sees it, prints it and ends its
  process (a rank blocked in a collective that waits for the failed one would otherwise hang until
  the collective's timeout, 30 minutes for gloo);
- a step that runs past `--step-timeout` ends the run, naming the rank that hung: every rank
  publishes its progress (steps begun plus gradient buckets sent, from `CommClock`) about once a
  second, and the rank whose deadline passes first names the rank furthest behind: the one
  stuck in its own forward or backward, while the others wait for it in a collective;
- a rank stopped by SIGTERM or Ctrl-C notes whether it saved its interrupted session, so rank 0
  can say which sessions exist instead of assuming all do.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch.distributed as dist

FAILED_KEY = "hybridprof/failed"
ACKS_KEY = "hybridprof/failed-acks"
PROGRESS_KEY = "hybridprof/progress/{rank}"
STOPPED_KEY = "hybridprof/stopped/{rank}"
POLL_S = 0.2
ACK_WAIT_S = 10.0  # how long a failed rank waits for the others to see its error before exiting
STORE_ERRORS = 25  # consecutive store errors (5 s) before a watcher decides the store is gone
PUBLISH_S = 1.0  # how often a rank's progress goes to the store, at most
TIMEOUT_ACK_WAIT_S = 3.0  # after a step timeout, how long to wait for the others' acks


@dataclass(frozen=True, slots=True)
class Failure:
    """A posted failure: the rank that failed (or hung), the rank that said so, and why."""

    rank: int
    by: int
    message: str


@dataclass
class StepWatch:
    """What the watcher reads of this rank's steps (`CommClock` keeps it up to date)."""

    open_step: Callable[[], tuple[int, float] | None]  # (step, monotonic start) of the one running
    progress: Callable[[], int]  # steps begun and buckets sent so far: only ever grows
    timeout_s: float


class FailureBoard:
    """Failures, hangs and interruptions, posted in torchrun's store and watched for on every
    rank (see the module docstring)."""

    def __init__(self, rank: int, world_size: int, store: Any) -> None:
        self.rank = rank
        self.world_size = world_size
        self.store = store
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="hybridprof-failures", daemon=True)
        self.steps: StepWatch | None = None
        self._published = (-1, 0.0)  # (progress, when) last sent to the store
        # Set once the watcher is ending this process (another rank failed, a step timed out):
        # what the main thread then runs into (a collective whose peer is gone) is no news.
        self.ending = threading.Event()

    @classmethod
    def connect(cls, rank: int, world_size: int) -> FailureBoard | None:
        """A client of torchrun's store (MASTER_ADDR:MASTER_PORT); None where there is none."""
        host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not host or not port or not port.isdigit():
            return None
        try:
            store = dist.TCPStore(  # type: ignore[attr-defined]
                host, int(port), is_master=False, timeout=timedelta(seconds=30)
            )
        except (RuntimeError, ValueError):
            return None
        run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
        prefixed = dist.PrefixStore(f"hybridprof/{run}", store)  # type: ignore[attr-defined]
        return cls(rank, world_size, prefixed)

    def start(self) -> None:
        self.thread.start()

    def wait_for_the_end(self) -> None:
        """Let the watcher, which is ending this process, finish saying why (then leave)."""
        self.thread.join(timeout=ACK_WAIT_S + 5)
        leave(3)

    def close(self) -> None:
        """Stop watching (the thread ends within a poll; waited for briefly, never forever)."""
        self.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=2 * POLL_S)

    # -- failures

    def post(self, message: str, rank: int | None = None, wait_s: float = ACK_WAIT_S) -> None:
        """Say that `rank` (this one by default) failed, and give the others a moment (`wait_s`)
        to see it before this rank exits."""
        failed = self.rank if rank is None else rank
        self.store.set(FAILED_KEY, f"{failed}\t{self.rank}\t{message}")
        deadline = time.monotonic() + wait_s
        others = self.world_size - 1
        while time.monotonic() < deadline and self.store.add(ACKS_KEY, 0) < others:
            time.sleep(POLL_S / 2)

    def posted(self) -> Failure | None:
        if not self.store.check([FAILED_KEY]):
            return None
        rank, by, message = self.store.get(FAILED_KEY).decode().split("\t", 2)
        return Failure(int(rank), int(by), message)

    def other_failure(self) -> Failure | None:
        """A failure another rank posted, if any (this rank's own post does not count)."""
        try:
            failure = self.posted()
        except RuntimeError:
            return None
        return failure if failure is not None and failure.by != self.rank else None

    # -- interruptions

    def note_stopped(self, saved: bool) -> None:
        """Note that this rank was interrupted, and whether it saved its session."""
        # the store may be gone: rank 0 then says what it finds on disk
        with contextlib.suppress(RuntimeError):
            self.store.set(STOPPED_KEY.format(rank=self.rank), "saved" if saved else "nothing")

    def stopped_ranks(self, wait_s: float) -> dict[int, bool]:
        """Per rank that noted an interruption within `wait_s`: whether it saved its session."""
        keys = [STOPPED_KEY.format(rank=r) for r in range(self.world_size)]
        deadline = time.monotonic() + wait_s
        found: dict[int, bool] = {}
        while True:
            try:
                for rank, key in enumerate(keys):
                    if rank not in found and self.store.check([key]):
                        found[rank] = self.store.get(key).decode() == "saved"
            except RuntimeError:
                return found
            if len(found) == self.world_size or time.monotonic() >= deadline:
                return found
            time.sleep(POLL_S / 2)

    # -- the watcher

    def _watch(self) -> None:
        errors = 0
        while not self.stop.wait(POLL_S):
            try:
                failure = self.posted()
                self._publish_progress()
            except RuntimeError:
                errors += 1  # a busy store can time out once; a gone one keeps failing
                if errors >= STORE_ERRORS:
                    return
                continue
            errors = 0
            if failure is not None and failure.by != self.rank:
                self._stop_this_rank(failure)
            overdue = self._overdue()
            if overdue is not None:
                self._step_timed_out(*overdue)

    def _publish_progress(self) -> None:
        steps = self.steps
        if steps is None:
            return
        progress, now = steps.progress(), time.monotonic()
        last, when = self._published
        if progress != last and now - when >= PUBLISH_S:
            self.store.set(PROGRESS_KEY.format(rank=self.rank), str(progress))
            self._published = (progress, now)

    def _overdue(self) -> tuple[int, float] | None:
        steps = self.steps
        running = steps.open_step() if steps is not None else None
        if steps is None or running is None:
            return None
        step, started = running
        elapsed = time.monotonic() - started
        return (step, elapsed) if elapsed > steps.timeout_s else None

    def _step_timed_out(self, step: int, elapsed: float) -> None:
        """This rank's step ran past the timeout: name the rank that hung, tell the others, and
        end this process (the step may be blocked in C++, beyond any Python exception)."""
        assert self.steps is not None
        self.ending.set()
        said = hang_report(self.rank, step, self.steps.timeout_s, self.furthest_behind())
        print(f"hybridprof: error: {said.line}", file=sys.stderr, flush=True)
        try:
            if self.posted() is None:  # a rank that hung too is in here itself: no long wait
                self.post(said.message, rank=said.culprit, wait_s=TIMEOUT_ACK_WAIT_S)
        finally:
            leave(3)

    def furthest_behind(self) -> list[int]:
        """The ranks whose last published progress is the least (a rank that published none
        counts as furthest behind)."""
        progress: dict[int, int] = {}
        for rank in range(self.world_size):
            key = PROGRESS_KEY.format(rank=rank)
            try:
                progress[rank] = int(self.store.get(key)) if self.store.check([key]) else -1
            except (RuntimeError, ValueError):
                progress[rank] = -1
        if self.steps is not None:
            progress[self.rank] = self.steps.progress()  # its own, fresher than the store's
        least = min(progress.values())
        return [rank for rank, done in sorted(progress.items()) if done == least]

    def _stop_this_rank(self, failure: Failure) -> None:
        self.ending.set()
        if failure.rank == self.rank:  # named by another rank: this one hung
            line = f"rank {self.rank}: {failure.message}"
        else:
            line = f"rank {failure.rank} failed: {failure.message} (rank {self.rank} stopped)"
        print(f"hybridprof: error: {line}", file=sys.stderr, flush=True)
        try:
            self.store.add(ACKS_KEY, 1)
        finally:
            # This rank may be blocked inside a collective that waits for the failed rank; only
            # ending the process frees it (a Python exception cannot reach the blocked thread).
            leave(3)


@dataclass(frozen=True, slots=True)
class HangReport:
    culprit: int  # the rank named as hung
    message: str  # what is posted for the others
    line: str  # what this rank prints (without "hybridprof: error: ")


def hang_report(me: int, step: int, timeout_s: float, behind: list[int]) -> HangReport:
    """What rank `me` says when its step `step` (0-based) ran past `timeout_s`, the ranks
    `behind` being those furthest behind: itself if it is one of them (then it hung), else the
    first of them (it waited for that one in a collective)."""
    # 1-based, counting every step the rank ran (warm-up, and each iteration's warm step)
    limit = f"step {step + 1} of the run did not finish within {timeout_s:g} s (--step-timeout)"
    if me in behind or not behind:
        if len(behind) > 1:  # as far as each other: no rank can be told to be the one
            ranks = ", ".join(map(str, behind))
            message = (
                f"{limit} on ranks {ranks}, none further behind than the others: a hang in "
                "their forward or backward, or in a collective none of them finished"
            )
        else:
            message = f"{limit}: it hung in its forward or backward"
        return HangReport(me, message, f"rank {me}: {message}")
    culprit = behind[0]
    message = (
        f"{limit} on rank {me}, which waited for it: rank {culprit} was furthest behind, hung "
        "in its forward or backward"
    )
    return HangReport(culprit, message, f"rank {culprit} failed: {message} (rank {me} stopped)")


def leave(code: int) -> None:
    """End this process now, after flushing what it printed: no destructors run, so none of
    torch.distributed's (a process group, a store client with a thread still in a call) can
    abort the process while torchrun is stopping it (the window of a rank's SIGABRT)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


__all__ = [
    "Failure",
    "FailureBoard",
    "HangReport",
    "StepWatch",
    "hang_report",
    "leave",
]
