"""torchrun ranks that hang or are stopped (issue 25: M-12, M-13), under a real `torchrun
--nproc-per-node 2` (gloo, CPU), each run killed with all its workers past a hard timeout.

Three torchrun runs: a rank that hangs in its forward (the run ends at --step-timeout, naming
it), SIGTERM to torchrun (a scheduler stopping the job: every rank saves its interrupted
session) and SIGTERM to one rank (it saves its session; rank 0 says which exist).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.paths import FIXTURES

MODEL = str(FIXTURES / "stuck_ranks.py")
HARD_TIMEOUT_S = 150

pytestmark = pytest.mark.slow


def descendants(root: int) -> list[int]:
    """Every process below `root` (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@contextmanager
def torchrun(args: list[str], cwd: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """torchrun of `hybridprof run` in the background; on the way out every process it started
    is killed (a hung rank would otherwise sleep on)."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += ["-m", "hybridprof", "run", MODEL, "--threads", "1", "--out-dir", "out", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    proc = subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: set[int] = set()
    try:
        yield proc
    finally:
        seen.update(descendants(proc.pid))
        for pid in [proc.pid, *seen]:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate()


def ours(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("hybridprof:")]


def test_a_rank_that_hangs_ends_the_run_at_the_step_timeout_naming_it(tmp_path: Path) -> None:
    args = ["--entry", "build_hanging", "--backward", "--ddp", "--warmup", "1", "--iters", "3"]
    args += ["--step-timeout", "5"]
    with torchrun(args, tmp_path, {}) as proc:
        start = time.monotonic()
        _, err = proc.communicate(timeout=HARD_TIMEOUT_S)
        took = time.monotonic() - start
    assert proc.returncode != 0
    lines = ours(err)
    assert lines, err[-3000:]
    # each rank that got to say something names rank 1 as the one that hung
    assert all("rank 1" in line and "did not finish within 5 s (--step-timeout)" in line
               for line in lines), lines  # fmt: skip
    assert any("hung in its forward or backward" in line for line in lines), lines
    assert took < HARD_TIMEOUT_S - 30  # it ended by itself, not by the kill


def wait_for(path: Path, proc: subprocess.Popen[str], limit_s: float = 120) -> int:
    deadline = time.monotonic() + limit_s
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"no {path.name}: the rank never reached its measured iterations"
    return int(path.read_text())


def saved(out: Path, rank: int) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / f"session-rank{rank}.json").read_text())
    return data


def test_sigterm_to_torchrun_saves_every_ranks_interrupted_session(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    args = ["--entry", "build_marked", "--warmup", "1", "--iters", "200"]
    with torchrun(args, tmp_path, {"HYBRIDPROF_TEST_READY": str(ready)}) as proc:
        wait_for(ready, proc)
        wait_for(ready.with_name("ready.rank0"), proc)  # both ranks measure: both have a session
        proc.send_signal(signal.SIGTERM)  # what a scheduler does: torchrun passes it on
        _, err = proc.communicate(timeout=HARD_TIMEOUT_S)
    out = tmp_path / "out"
    for rank in (0, 1):
        assert saved(out, rank)["interrupted"] is True, err[-3000:]
    lines = ours(err)
    assert any(line.startswith("hybridprof: rank 1 terminated (SIGTERM) after ") for line in lines)
    summary = [line for line in lines if "rank sessions saved:" in line]
    assert summary == [
        "hybridprof: rank sessions saved: out/session-rank0.json, out/session-rank1.json "
        "(merge the saved ones with hybridprof merge)"
    ], lines


def test_sigterm_to_one_rank_saves_its_session_and_rank0_says_what_exists(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    args = ["--entry", "build_marked", "--warmup", "1", "--iters", "200"]
    with torchrun(args, tmp_path, {"HYBRIDPROF_TEST_READY": str(ready)}) as proc:
        os.kill(wait_for(ready, proc), signal.SIGTERM)
        _, err = proc.communicate(timeout=HARD_TIMEOUT_S)
    out = tmp_path / "out"
    assert saved(out, 1)["interrupted"] is True, err[-3000:]
    # torchrun stops rank 0 once rank 1 has ended: whatever rank 0 then says is true
    for line in ours(err):
        if "rank sessions saved:" in line:
            listed = line.split("saved: ", 1)[1].split(" (merge", 1)[0].split("; missing")[0]
            assert all((tmp_path / name).is_file() for name in listed.split(", ")), line
