"""The largest iteration counts and thread counts a run takes (torch-free: the CLI checks them
before importing torch, the library when a run starts).

Iterations: every measured iteration's per-layer times are kept, for the medians' confidence
intervals, and saved in the session (~3 KB an iteration on a 3-layer model, ~2 MB at 10,000
layers), so an absurd `--iters` would grow memory until the machine runs out. 100,000 is far more
than a median needs (`--iters auto` stops at 1,000). Threads: OpenMP starts the pool at the next
op; 100,000 threads end in "Resource temporarily unavailable", then a crash.
"""

from __future__ import annotations

import os

MAX_ITERATIONS = 100_000


# The torch threads of `run`, `profile()` and `diff --run` unless told otherwise: one, whatever the
# machine and its load. A count fitted to the free cores would change with the load, and so would
# every per-layer time (on 2 cores a small layer read 400x its 1-thread time at 2 threads with one
# other job running); with one thread the figures of a quiet and a busy run can be compared, and
# the intra-op threads' own waits cannot land in a layer. Multi-threaded speed is asked for with
# --threads N (threads=N).
DEFAULT_THREADS = 1


def default_threads_line() -> str:
    """The one line that says the default was used, and how to choose."""
    return (
        f"torch runs on {DEFAULT_THREADS} thread, hybridprof's default, so per-layer times do "
        "not depend on the machine's load (--threads N to choose)"
    )


def max_threads() -> int:
    """The most torch threads a run may ask for: 4 per usable core (oversubscribing on purpose
    stays possible), and at least 64."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(64, 4 * cores)


def threads_problem(threads: int, option: str) -> str | None:
    """Why `threads` cannot be used (named as `option`), or None when it can."""
    if threads < 1:
        return f"{option} must be 1 or more, got {threads}"
    limit = max_threads()
    if threads > limit:
        shown = f"{threads:,}" if threads < 10**12 else f"{str(threads)[:12]}..."
        return (
            f"{option} {shown} is more threads than this machine can run ({limit} at most here: "
            "4 per core); give 1 for the steadiest per-layer times"
        )
    return None


def iterations_problem(count: int, option: str) -> str | None:
    """Why a fixed iteration count cannot be used (named as `option`), or None."""
    if count <= MAX_ITERATIONS:
        return None
    shown = f"{count:,}" if count < 10**12 else f"{str(count)[:12]}..."
    return (
        f"{option} {shown} is more than hybridprof runs ({MAX_ITERATIONS:,} at most: every "
        "measured iteration's per-layer times are kept, and memory would grow with them); give "
        "fewer, or auto"
    )


__all__ = [
    "DEFAULT_THREADS",
    "MAX_ITERATIONS",
    "default_threads_line",
    "iterations_problem",
    "max_threads",
    "threads_problem",
]
