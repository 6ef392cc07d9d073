"""`hybridprof run --compile [--compare-eager]` as a user runs it (a subprocess, compiling for
real: slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridprof.cli.profiling import COMPILING_LINE
from tests.integration.cli_run import FIXTURES, hybridprof

MODEL = str(FIXTURES / "compiled_models.py")
pytestmark = pytest.mark.slow


def test_compare_eager_prints_and_saves_the_comparison(tmp_path: Path) -> None:
    done = hybridprof(
        "run", MODEL, "--compile", "--compare-eager", "--warmup", "1", "--iters", "2",
        "--threads", "1", "--out-dir", "out", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the compile takes seconds to minutes: said before it starts, not a silent wait
    assert done.stderr.splitlines()[0] == COMPILING_LINE
    table = done.stderr
    assert "Speed-up" in table and "Fused" in table
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    assert lines["attn"].rstrip().split()[-1].endswith("x")  # eager, compiled, speed-up
    for name in ("compare.html", "compare.json", "session.json"):
        assert (tmp_path / "out" / name).is_file(), name
    diff = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert (diff["base"]["label"], diff["new"]["label"]) == ("eager", "compiled")
    session = json.loads((tmp_path / "out" / "session.json").read_text())
    assert session["compiled"]["compiled_by"] == "hybridprof"
    assert "graph" in done.stdout and "in no layer's time" in done.stdout


def test_a_compile_mode_without_compile_is_refused_in_one_line(tmp_path: Path) -> None:
    done = hybridprof("run", MODEL, "--compile-mode", "max-autotune", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hybridprof: error: a compile mode needs compile=True / --compile"
    ]
    assert not (tmp_path / "hybridprof-out").exists()
