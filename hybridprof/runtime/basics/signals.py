"""Keep Ctrl-C (and SIGTERM) out of the profiler's start and stop; SIGTERM stops a run like Ctrl-C.

A KeyboardInterrupt raised while torch's profiler is starting or stopping (or between its start
and the line that records it) leaves a session nobody stops; a CUDA build of torch 2.14 then
crashed at interpreter exit (SIGSEGV, about 1 run in 4 of the real-SIGINT test). Inside
`sigint_deferred()` a Ctrl-C is only noted, and raised as KeyboardInterrupt when the block ends,
so the run still stops at once, with the profiler in a known state.

`sigterm_as_interrupt()` (the CLI's `run`) makes SIGTERM raise `Terminated`, a KeyboardInterrupt:
the iterations measured so far are saved, temporary files are removed, and the command can exit
143. Inside `sigint_deferred()` a SIGTERM is held the same way.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from hybridprof.errors import Terminated


class TerminateHandler:
    """The SIGTERM handler while a run is on: notes the signal, raises `Terminated` once.

    Once: the first SIGTERM already stops the run, which then saves what it measured; a second
    one (a scheduler repeating itself, torchrun passing on its own) would only abort that save.
    """

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.received:
            return
        self.received = True
        raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[TerminateHandler]:
    """SIGTERM raises `Terminated` for the duration (main thread, default handler only).

    The handler it yields says afterwards whether SIGTERM came (the run may have caught the
    interrupt and saved a partial session).
    """
    handler = TerminateHandler()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield handler  # signals go to the main thread; a user's own handler is left alone
        return
    signal.signal(signal.SIGTERM, handler)
    try:
        yield handler
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold SIGINT (and SIGTERM made an interrupt) for the duration, then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals go to the main thread
        return
    term = signal.getsignal(signal.SIGTERM)
    ours = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: term}
    held = [signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else []
    held += [signal.SIGTERM] if isinstance(term, TerminateHandler) else []
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for signum in held:  # a user's own handler is left alone
        signal.signal(signum, note)
    try:
        yield
    finally:
        for signum in held:
            signal.signal(signum, ours[signum])
    if signal.SIGTERM in received and isinstance(term, TerminateHandler):
        term(signal.SIGTERM, None)  # raises Terminated, unless one came before: then ignored
        received = [signum for signum in received if signum != signal.SIGTERM]
    if received:
        raise KeyboardInterrupt
