"""The thread's wait for a CPU, read from the kernel's schedstat through a kept-open file."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hybridprof.runtime.basics.cpu_wait import SCHEDSTAT, WaitClock


@pytest.mark.skipif(not Path(SCHEDSTAT).exists(), reason="Linux schedstat")
def test_the_clock_reads_a_growing_count_of_nanoseconds() -> None:
    clock = WaitClock()
    try:
        first = clock.read()
        time.sleep(0.01)
        assert clock.available and first is not None
        later = clock.read()
        assert later is not None and later >= first
    finally:
        clock.close()
    assert not clock.available and clock.read() is None


def test_no_file_or_another_format_means_unknown(tmp_path: Path) -> None:
    assert WaitClock(str(tmp_path / "missing")).read() is None
    odd = tmp_path / "schedstat"
    odd.write_text("not numbers\n")
    assert not WaitClock(str(odd)).available
    assert WaitClock.closed().read() is None


@pytest.mark.skipif(not Path(SCHEDSTAT).exists(), reason="Linux schedstat")
def test_the_file_stays_bound_to_the_thread_that_opened_it() -> None:
    clock = WaitClock()
    mine = os.pread(os.open(SCHEDSTAT, os.O_RDONLY), 128, 0).split()[0]
    seen: list[bytes] = []
    worker = threading.Thread(target=lambda: seen.append(os.pread(clock._fd or 0, 128, 0)))
    worker.start()
    worker.join()
    clock.close()
    assert int(seen[0].split()[0]) >= int(mine)  # this thread's run time, read from another
