"""`hybridprof run --compile [--compare-eager]` as a user runs it (a subprocess, compiling for
real: slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    assert done.stderr.splitlines()[0].startswith("compiling the model (inductor) in warm-up")
    table = done.stderr
    assert "Speed-up" in table and "Fused" in table
    assert "compiling the model (inductor) in warm-up" in table  # said as it starts, and ends:
    assert "compiled the model (inductor): warm-up took" in table  # a log is not silent meanwhile
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    speedup = [
        c for c in lines["attn"].split() if c.endswith("x") and c[:-1].replace(".", "").isdigit()
    ]
    assert speedup  # eager, compiled, speed-up (then what it fused, if anything)
    for name in ("compare.html", "compare.json", "session.json"):
        assert (tmp_path / "out" / name).is_file(), name
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert saved["kind"] == "hybridprof-speedup"
    assert (saved["eager"]["label"], saved["compiled"]["label"]) == ("eager", "compiled")
    assert (saved["eager"]["threads"], saved["compiled"]["threads"]) == (1, 1)
    paths = {row["path"] for row in saved["rows"]}
    assert "" in paths and any(p.rpartition(".")[2] == "attn" for p in paths)
    # the page states the terminal's headline, and `report` renders the saved comparison again
    headline = next(line for line in table.splitlines() if line.startswith("iteration (median)"))
    page = (tmp_path / "out" / "compare.html").read_text()
    assert headline.removeprefix("iteration (median): ") in page
    again = hybridprof("report", "out/compare.json", "-o", "again.html", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.html").read_text() == page
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


def test_the_comparison_is_never_written_through_a_link_nor_over_a_users_file(
    tmp_path: Path,
) -> None:
    """Its names are hybridprof's own (as OUT/session.json is): checked before any compile, a
    planted link or a file hybridprof did not write refused in one line, both left as they were."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "compare.html").symlink_to(victim)
    (out / "compare.json").write_text('{"mine": 1}')
    argv = ("run", MODEL, "--compile", "--compare-eager", "--iters", "2", "--out-dir", "out")
    for planted, left in (("compare.html", None), ("compare.json", "compare.html")):
        done = hybridprof(*argv, "--force", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert f"out/{planted}" in line and ("symbolic link" in line or "is not a" in line), line
        if left is None:
            (out / "compare.html").unlink()  # the next attempt meets the user's JSON
    assert victim.read_text() == "keep me"
    assert (out / "compare.json").read_text() == '{"mine": 1}'
    assert sorted(p.name for p in out.iterdir()) == ["compare.json"]


def test_the_comparison_is_named_after_the_report(tmp_path: Path) -> None:
    done = hybridprof(
        "run", MODEL, "--compile", "--compare-eager", "--warmup", "1", "--iters", "2",
        "--threads", "1", "--report", "net.html", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["net.compare.html", "net.compare.json", "net.html", "net.session.json"]
    again = hybridprof(
        "run", MODEL, "--compile", "--compare-eager", "--warmup", "1", "--iters", "2",
        "--threads", "1", "--report", "net.html", "--force", cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr  # its own comparison is replaced
