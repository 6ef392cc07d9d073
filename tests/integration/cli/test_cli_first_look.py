"""The first minutes on the command line: options spelt out, shapes checked whole, help that can
be piped into `head`, and a demo that does not time noise on a machine of few cores."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.files.storage import load_session
from tests.integration.cli_run import FIXTURES, QUICK, SCRIPT


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize(
    ("given", "meant"), [("--iter", "--iters"), ("--flop", "--flops"), ("--warm", "--warmup")]
)
def test_an_option_is_never_taken_as_a_prefix(
    given: str, meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(FIXTURES / "run_small.py"), given, "2", "--out-dir", str(tmp_path / "o")]
    assert main(argv) == 2
    line = error_line(capsys)
    assert line.startswith("hybridprof: error: unrecognized arguments: ")
    assert f"(did you mean {meant}?)" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("shape", ["8x3x64x64x", "1,3,,4", "x4", "4,"])
def test_a_shape_with_an_empty_part_is_refused(
    shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(FIXTURES / "run_small.py"), "--input-shape", shape, *QUICK]
    assert main([*argv, "--out-dir", str(tmp_path / "o")]) == 2
    assert error_line(capsys) == (
        f"hybridprof: error: bad --input-shape '{shape}': give positive integers separated by "
        "commas or x, e.g. --input-shape 1,3,224,224 or 8x128:long"
    )


@pytest.mark.parametrize("argv", [["-h"], ["run", "-h"], ["report", "--help"], []])
def test_help_into_a_closed_pipe_ends_quietly(argv: list[str], tmp_path: Path) -> None:
    # `hybridprof -h | head -1`, with head already gone: every write meets a closed pipe
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [str(SCRIPT), *argv], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 0


def test_the_demo_runs_on_one_thread_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *QUICK, "--out-dir", str(tmp_path)]) == 0
    said = capsys.readouterr()
    assert "torch runs on 1 thread, hybridprof's default" in said.out + said.err
    assert load_session(tmp_path / "session.json").environment.threads == 1
