"""How `hybridprof run` ends when the model, a signal or the disk gets in the way, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
