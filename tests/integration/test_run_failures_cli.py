"""How `hybridprof run` ends when the model, a signal or the disk gets in the way, as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hybridprof.storage import load_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCRIPT = Path(sys.executable).with_name("hybridprof")
QUICK = ["--warmup", "0", "--iters", "1"]


def hybridprof(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_sys_exit_in_forward_is_a_model_failure(tmp_path: Path) -> None:
    done = hybridprof(
        "run", str(FIXTURES / "run_sys_exit.py"), *QUICK, "-o", "s.json", cwd=tmp_path
    )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "hybridprof: error: forward failed in 1 (Quits): it called sys.exit(0); a forward must "
        "return or raise; check that the inputs fit the model"
    ]
    assert not (tmp_path / "s.json").exists()


def test_sigterm_saves_what_was_measured_and_leaves_no_temp_files(tmp_path: Path) -> None:
    ready, temp = tmp_path / "ready", tmp_path / "tmp"
    temp.mkdir()
    argv = [str(SCRIPT), "run", str(FIXTURES / "run_signal.py"), "--warmup", "1"]
    argv += ["--iters", "1000000", "-o", "s.json", "--trace", "t.json"]
    env = {**os.environ, "HYBRIDPROF_TEST_READY": str(ready), "TMPDIR": str(temp)}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the model never reached its fifth call"
        time.sleep(0.3)  # a few more iterations
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM) after" in err and "partial session saved to s.json" in err
    assert "Traceback" not in err
    session = load_session(tmp_path / "s.json")
    assert session.interrupted and session.iterations >= 3
    assert (tmp_path / "t.json").is_file()
    assert list(temp.iterdir()) == []  # no hybridprof-trace-* folder left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready", "s.json", "t.json", "tmp"]
