"""Keep kineto's start/stop chatter off the user's terminal.

Kineto writes `USDT:... profiler_start` / `profiler_stop` lines from C++ straight to file descriptor
2, where Python's `sys.stderr` never sees them. `KINETO_LOG_LEVEL` only works if set before the
first profiler start in the process and also hides kineto's real error lines, so instead fd 2 is
pointed at a scratch file around each profiler start/stop, and every line that is not that chatter
is written back to the real fd 2 afterwards (nothing else is lost, only delayed until the window
closes). A CUDA build without a GPU driver also prints a `gpuGetDeviceCount failed` line at the
first start; it says nothing about CPU profiling and is dropped too.

With `profile_memory`, torch warns once per process, from C++ and whenever it happens, when a
block allocated before the profiler started is freed while it runs ("Memory block of unknown size
was allocated before the profiling started"): in a user's with-block that is any tensor made
before it. `allocator_warning_spent` frees such a block right after the first start, inside the
quiet window, so the one warning lands there and is dropped; the rest of the process never sees
it (the block hybridprof frees is its own, 64 bytes).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import IO

# Kineto's start/stop lines, and the line a CUDA build of torch (2.14.1+cu130) prints at the first
# profiler start on a machine without a GPU driver: CPU profiling is unaffected, so it is noise too.
_CHATTER = re.compile(
    rb"^(USDT:.*\bprofiler_(start|stop)\b.*"
    rb"|ERROR:.*DeviceProperties\.cpp:\d+\] gpuGetDeviceCount failed with code \d+"
    rb"|\[W\d+ [\d:.]+ CPUAllocator\.cpp:\d+\] Memory block of unknown size was allocated "
    rb"before the profiling started.*)$"
)

_lock = threading.RLock()
_depth = 0
_scratch: IO[bytes] | None = None
_allocator_warned = False  # torch's one-time warning about a block of unknown size was spent


def filter_chatter(data: bytes) -> bytes:
    """`data` without kineto's profiler_start/stop lines."""
    kept = [line for line in data.splitlines(keepends=True) if not _CHATTER.match(line.rstrip())]
    return b"".join(kept)


@contextlib.contextmanager
def quiet_fd2() -> Iterator[None]:
    """Capture fd 2 for the duration, then re-emit everything but the kineto chatter.

    Re-entrant (an inner use inside an outer one does nothing) and safe if fd 2 is closed.
    """
    global _depth
    with _lock:
        _depth += 1
        outer = _depth == 1
        try:
            if not outer:
                yield
                return
            with _redirected_fd2():
                yield
        finally:
            _depth -= 1


@contextlib.contextmanager
def allocator_warning_spent(profile_memory: bool) -> Iterator[None]:
    """Around a profiler start inside `quiet_fd2`: with `profile_memory`, the first time in the
    process, a block allocated before the start is freed after it (see the module docstring)."""
    global _allocator_warned
    if not profile_memory or _allocator_warned:
        yield
        return
    import torch

    before = [torch.empty(16)]  # allocated before the start: torch cannot know its size
    yield
    before.clear()  # freed while profiling: the one warning, into the quiet window
    _allocator_warned = True


@contextlib.contextmanager
def _redirected_fd2() -> Iterator[None]:
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all: nothing can reach a terminal
        yield
        return
    scratch = _scratch_file()
    _flush_python_stderr()
    os.dup2(scratch.fileno(), 2)
    try:
        yield
    finally:
        _flush_python_stderr()
        os.dup2(saved, 2)
        os.close(saved)
        _replay(scratch)


def _scratch_file() -> IO[bytes]:
    # One scratch file per process, truncated on each use: a new temp file per use costs more.
    global _scratch
    if _scratch is None or _scratch.closed:
        _scratch = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the process)
        atexit.register(_scratch.close)  # closed at exit, so no ResourceWarning is left behind
    _scratch.seek(0)
    _scratch.truncate()
    return _scratch


def _replay(scratch: IO[bytes]) -> None:
    scratch.seek(0)
    kept = filter_chatter(scratch.read())
    while kept:  # os.write may write only part of a large buffer
        kept = kept[os.write(2, kept) :]


def _flush_python_stderr() -> None:
    with contextlib.suppress(Exception):
        sys.stderr.flush()


__all__ = ["allocator_warning_spent", "filter_chatter", "quiet_fd2"]
