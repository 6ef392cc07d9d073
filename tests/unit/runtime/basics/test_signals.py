"""Ctrl-C is held while the profiler starts or stops, then raised."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from hybridprof.runtime.basics.signals import sigint_deferred


def test_sigint_inside_is_raised_when_the_block_ends() -> None:
    reached_end = False
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        reached_end = True  # the signal did not cut the block short
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_signal_no_exception_and_handler_restored() -> None:
    with sigint_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_users_own_handler_is_left_alone() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_other_threads_pass_through() -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with sigint_deferred():
                pass
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []


def test_sigterm_is_an_interrupt_held_like_ctrl_c() -> None:
    from hybridprof.errors import Terminated
    from hybridprof.runtime.basics.signals import sigterm_as_interrupt

    reached_end = False
    with sigterm_as_interrupt() as sigterm:
        with pytest.raises(Terminated), sigint_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            reached_end = True
        assert reached_end and sigterm.received
        # a second SIGTERM would only abort the saving the first began: it is ignored
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigterm_outside_a_held_block_is_raised_at_once() -> None:
    from hybridprof.errors import Terminated
    from hybridprof.runtime.basics.signals import sigterm_as_interrupt

    with sigterm_as_interrupt() as sigterm, pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)
    assert sigterm.received
