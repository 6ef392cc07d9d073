"""The installed entry points as a user runs them: `hybridprof` and `python -m hybridprof`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from hybridprof.files.storage import load_session
from tests.integration.cli_run import measuring_run
from tests.paths import FIXTURES

SCRIPT = Path(sys.executable).with_name("hybridprof")
QUICK = ["--warmup", "1", "--iters", "2"]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_console_script_runs_a_model_file(tmp_path: Path) -> None:
    model = str(FIXTURES / "run_small.py")
    done = run([str(SCRIPT), "run", model, *QUICK, "-o", "s.json", "--report", "r.txt"], tmp_path)
    assert done.returncode == 0, done.stderr
    # nothing on stderr: no progress bar off a terminal, no profiler chatter, no warnings
    assert done.stderr == ""
    assert "features" in done.stdout and "session: s.json" in done.stdout
    assert load_session(tmp_path / "s.json").iterations == 2
    assert (tmp_path / "r.txt").read_text().strip()


def test_python_m_runs_the_demo(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "hybridprof", "run", *QUICK, "--out-dir", "out"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "out" / "session.json").is_file()
    assert (tmp_path / "out" / "report.html").is_file()
    assert "report:  out/report.html" in done.stdout


def test_failure_is_one_line_with_exit_code(tmp_path: Path) -> None:
    done = run([str(SCRIPT), "run", str(FIXTURES / "run_bad_shape.py"), *QUICK], tmp_path)
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "hybridprof: error: forward failed in classifier.0 (Linear): "
        "mat1 and mat2 shapes cannot be multiplied (4x32 and 64x10); "
        "check that the inputs fit the model"
    ]


def test_real_sigint_saves_an_interrupted_session(tmp_path: Path) -> None:
    with measuring_run(tmp_path, "-o", "s.json") as proc:
        time.sleep(0.2)  # a few more iterations
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted after" in err and "partial session saved to s.json" in err
    session = load_session(tmp_path / "s.json")
    assert session.interrupted and session.iterations >= 4
    assert "Traceback" not in err
