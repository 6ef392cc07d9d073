"""Running the installed `hybridprof` command in a subprocess, as a user would: shared by the CLI
tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.paths import FIXTURES

SCRIPT = Path(sys.executable).with_name("hybridprof")
QUICK = ["--warmup", "0", "--iters", "1"]


def hybridprof(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@contextmanager
def measuring_run(
    cwd: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`hybridprof run` of fixtures/run_signal.py (100,000 iterations) started in the
    background; yields once it measures (the model says so through a file), kills it on the way
    out if it is still running."""
    ready = cwd / "ready"
    argv = [str(SCRIPT), "run", str(FIXTURES / "run_signal.py"), "--warmup", "1"]
    argv += ["--iters", "100000", *options]  # the most a run takes: forever, for a test
    environment = {**os.environ, **(env or {}), "HYBRIDPROF_TEST_READY": str(ready)}
    proc = subprocess.Popen(
        argv, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the model never reached its fifth call"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
