"""Integration tests run in their own temporary folder: a command's default outputs
(./hybridprof-out/) land there, never in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def waits_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs that do not read the thread's waits for a CPU (as on a system without schedstat):
    no iteration is excluded for time lost to other processes, so a test can count iterations
    exactly however busy the machine is."""
    from hybridprof.runtime.basics.cpu_wait import WaitClock
    from hybridprof.runtime.runs import driver

    class Unknown(WaitClock):
        def __init__(self, path: str = "") -> None:
            super().__init__("")  # no file: every read is None

    monkeypatch.setattr(driver, "WaitClock", Unknown)
