"""Under load the verdict is "noisy" and the terminal says so with the fix (a real loaded run).

Two busy processes share two cores with `hybridprof run` at its default options. The run is a fresh
process pinned to the same two cores as the busy loops; the loops end by themselves after two
minutes even if this test is killed, and are stopped as soon as the run is done. A `Profile`
with-block, which keeps the user's threads, marks every time as inflated when those threads
outnumber the free cores.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table
from hybridprof.reporting.trust import INFLATED
from tests.paths import FIXTURES

# It says "spinning" once it runs, so a test's run starts only when both compete for the cores (a
# short run finished before the children's Python had started, and recorded no wait at all).
BUSY_LOOP = (
    "import time\nprint('spinning', flush=True)\nend = time.time() + 120\n"
    "while time.time() < end:\n    pass\n"
)

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
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for loop in loops:
            assert loop.stdout is not None and loop.stdout.readline().strip() == "spinning"
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
    assert "of the 2 cores" in stability["advice"]
    assert stability["threads"] == 1  # the default, whatever the load
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if "noisy timings" in line]
    assert len(warnings) == 1  # said once, above the table (before its header), in one line
    assert warnings[0].startswith("warning: noisy timings: ")
    assert lines.index(warnings[0]) < next(i for i, x in enumerate(lines) if x.startswith("Module"))
    assert "background jobs" in warnings[0]
    assert not re.search(r"±\s*[1-9]\d{2,}(\.\d+)?%", result.stdout)  # no ±N% over 100


def test_a_with_block_on_more_threads_than_free_cores_marks_its_times(
    busy_cores: set[int],
) -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    x = torch.rand(32, 64)
    before_affinity, before_threads = os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, busy_cores)
    torch.set_num_threads(2)
    try:
        with hybridprof.Profile(model) as prof:
            for _ in range(8):
                model(x)
                prof.step()
    finally:
        os.sched_setaffinity(0, before_affinity)
        torch.set_num_threads(before_threads)
    session = prof.session()
    assert session.environment.threads == 2  # the user's threads, kept
    assert session.stability is not None and session.stability.threads_exceed_free_cores
    table = fitted_table(session, TableChoice(width=200)).text
    rows = [line for line in table.splitlines() if "Linear" in line or "ReLU" in line]
    assert rows and all(INFLATED in row for row in rows), table


def test_iterations_that_lost_their_core_to_other_processes_are_excluded(
    busy_cores: set[int],
) -> None:
    """Structural only: under two busy loops on the run's two cores, waits are recorded and the
    iterations hit are taken out (or, past the limit, kept and counted).

    Each forward is tens of milliseconds (about 1 GFLOP on one thread), so the 22 calls span many
    scheduler slices: with three runnable tasks on two cores the run must wait. A forward of a
    fraction of a millisecond could finish inside the slices the scheduler gave it first and
    record no wait at all (it did once in CI)."""
    if not Path("/proc/thread-self/schedstat").exists():
        pytest.skip("no schedstat on this kernel")
    model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(8)])
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, busy_cores)
    try:
        session = hybridprof.profile(model, torch.rand(256, 512), warmup=2, iters=20)
    finally:
        os.sched_setaffinity(0, before)
    assert isinstance(session, hybridprof.ProfileSession)
    waits = session.cpu_waits
    assert waits is not None and waits.source == "schedstat"
    assert waits.excluded + waits.kept_over > 0 or sum(waits.kept_wait_us) > 0
    assert len(waits.kept_wait_us) == session.iterations == 20
    if waits.excluded:
        said = [w for w in session.warnings if "to other processes; excluded" in w]
        assert len(said) == 1 and said[0].startswith(f"{waits.excluded} of ")


UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _us(text: str) -> float:
    """The first time in a cell (`1.920ms ±3%`: 1920.0); 0 for an empty one."""
    found = re.search(r"(\d+(?:\.\d+)?)(us|ms|s)\b", text)
    return float(found.group(1)) * UNITS[found.group(2)] if found else 0.0


def _terminal_rows_us(stdout: str) -> tuple[float, float]:
    """The printed table's own times summed (self forward and backward of every row), and the
    headline the summary line states."""
    lines = stdout.splitlines()
    top = next(i for i, x in enumerate(lines) if x.startswith("Module"))
    header = [c.strip() for c in lines[top].split("|")]
    body = []
    for line in lines[top + 2 :]:
        if "|" not in line:
            break
        body.append([c.strip() for c in line.split("|")])
    own = sum(
        _us(row[header.index("Self CPU")]) + _us(row[header.index("Self bwd")]) for row in body
    )
    said = re.search(r"measured training steps, (\S+) profiled CPU each, the rows' sum", stdout)
    assert said is not None, stdout
    return own, _us(said.group(1))


def test_under_load_the_rows_add_up_to_the_headline_in_every_view(
    busy_cores: set[int], tmp_path: Path
) -> None:
    """Structural, by construction: whatever the pauses, the headline is the rows' sum (within
    the 1% the printed rounding allows) in the terminal, the HTML header, the CSV and the
    DataFrame, and a parent's total is its subtree's rows."""
    from hybridprof.analysis.layer_table import layer_table
    from hybridprof.datamodel import ProfileSession
    from hybridprof.reporting.dataframe import render_csv, session_frame

    session_file, report = tmp_path / "s.json", tmp_path / "r.html"
    cores = busy_cores
    command = [sys.executable, "-m", "hybridprof", "run", str(FIXTURES / "run_small.py")]
    command += ["--backward", "--warmup", "2", "--iters", "8", "-o", str(session_file)]
    result = subprocess.run(
        [*command, "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
        env={**os.environ, "COLUMNS": "250"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    own, headline = _terminal_rows_us(result.stdout)
    assert own == pytest.approx(headline, rel=0.01)
    session = ProfileSession.from_json(session_file.read_text())
    table = layer_table(session)
    assert table.iteration_us == pytest.approx(headline, rel=0.001)
    page = report.read_text()
    shown = re.search(r"<dt>Total profiled time</dt><dd[^>]*>([^<]+)", page)
    assert shown is not None and _us(shown.group(1)) == pytest.approx(headline, rel=0.001)
    frame = session_frame(session)
    frame_own = frame["self_cpu_us"].sum() + frame["backward_self_cpu_us"].fillna(0.0).sum()
    assert frame_own == pytest.approx(frame.attrs["iteration_us"], rel=0.01)
    tops = frame[frame["depth"] == 0]  # the root and the outside row
    whole = tops["total_cpu_us"].sum() + tops["backward_total_cpu_us"].fillna(0.0).sum()
    assert whole == pytest.approx(table.iteration_us, rel=0.01)
    rows = list(csv.DictReader(io.StringIO(render_csv(session))))
    csv_own = sum(
        float(r["self_cpu_us"] or 0) + float(r["backward_self_cpu_us"] or 0) for r in rows
    )
    assert csv_own == pytest.approx(headline, rel=0.01)
