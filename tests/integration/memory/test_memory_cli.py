"""`hybridprof run --profile-memory` as a user runs it: the memory block under the table, with
--backward and --flops together, and the session re-rendered by `hybridprof report`."""

from __future__ import annotations

from pathlib import Path

from hybridprof.files.storage import load_session
from tests.integration.cli_run import FIXTURES, hybridprof

RUN = ["--warmup", "1", "--iters", "2", "--threads", "1"]


def test_run_prints_the_memory_block_beside_flops(tmp_path: Path) -> None:
    done = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *RUN, "--profile-memory", "--backward",
        "--flops", "--peak-gflops", "50", "--peak-gbps", "10", "-o", "s.json",
        "--report", "r.html", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    block = next(i for i, line in enumerate(lines) if line.startswith("memory on cpu ("))
    assert lines[block + 1].startswith("  step peak ")
    assert lines[block + 2].startswith("  live then: ") and "parameters" in lines[block + 2]
    assert lines[block + 3].startswith("  kept most for backward: features.0.fc ")
    assert any(line.startswith("FLOPs per step:") for line in lines)
    session = load_session(tmp_path / "s.json")
    assert session.memory is not None and session.flops is not None
    assert 'id="memory"' in (tmp_path / "r.html").read_text()
    again = hybridprof("report", "s.json", "-o", "r.txt", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "memory per layer on cpu, per step:" in (tmp_path / "r.txt").read_text()


def test_a_forward_run_says_nothing_is_saved_for_backward(tmp_path: Path) -> None:
    done = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *RUN, "--profile-memory", "-o", "s.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "  nothing saved for backward (forward under no_grad; use --backward)" in done.stdout
