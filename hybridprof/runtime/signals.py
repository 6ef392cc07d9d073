"""Keep Ctrl-C out of the profiler's start and stop.

A KeyboardInterrupt raised while torch's profiler is starting or stopping (or between its start
and the line that records it) leaves a session nobody stops; a CUDA build of torch 2.14 then
crashed at interpreter exit (SIGSEGV, about 1 run in 4 of the real-SIGINT test). Inside
`sigint_deferred()` a Ctrl-C is only noted, and raised as KeyboardInterrupt when the block ends,
so the run still stops at once, with the profiler in a known state.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold SIGINT for the duration (main thread, default Python handler only), then raise it."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield  # signals go to the main thread; a user's own handler is left alone
        return
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if received:
        raise KeyboardInterrupt
