"""Under load the verdict is "noisy" and the terminal says so with the fix (a real loaded run).

Two busy processes share two cores with `hybridprof run` at torch's default threads, the case where
small layers read 100x their time. The run is a fresh process (so torch picks its default thread
count) pinned to the same two cores as the busy loops; the loops end by themselves after two
minutes even if this test is killed, and are stopped as soon as the run is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import FIXTURES

BUSY_LOOP = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not Path("/proc/loadavg").exists(),
    reason="pins processes to cores and reads /proc/loadavg (Linux)",
)


def two_cores() -> set[int]:
    return set(sorted(os.sched_getaffinity(0))[:2])


@pytest.fixture
def busy_cores() -> Iterator[set[int]]:
    cores = two_cores()
    loops = [
        subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP],
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
        )
        for _ in range(2)
    ]
    try:
        yield cores
    finally:
        for loop in loops:
            loop.kill()
            loop.wait(timeout=30)


def test_two_busy_processes_on_two_cores_make_the_run_noisy(
    busy_cores: set[int], tmp_path: Path
) -> None:
    session_file = tmp_path / "s.json"
    cores = busy_cores
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hybridprof",
            "run",
            str(FIXTURES / "run_small.py"),
            "--warmup",
            "2",
            "--iters",
            "8",
            "-o",
            str(session_file),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    stability = json.loads(session_file.read_text())["stability"]
    assert stability["verdict"] == "noisy", stability
    assert "exceed" in stability["advice"]
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if "noisy timings" in line]
    # said above the table (before its header) and again with the run's other warnings
    assert len(warnings) == 2 and warnings[0] == warnings[1]
    assert warnings[0].startswith("warning: noisy timings: ")
    assert lines.index(warnings[0]) < next(i for i, x in enumerate(lines) if x.startswith("Module"))
    fix = "--threads 1" if stability["threads"] > 1 else "background jobs"
    assert fix in warnings[0]
