"""Module names with escape sequences or formulas are shown, never run (terminal, .txt, .csv)."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.integration.cli_run import FIXTURES, hybridprof

MODEL = str(FIXTURES / "run_hostile_names.py")
RAW = ("\x1b", "\x07", "\r")


def assert_escaped(text: str) -> None:
    assert not any(ch in text for ch in RAW), repr(text)
    assert "title\\x1b]0;pwned\\x07" in text
    assert "red\\x1b[31mX\\rY" in text


def test_run_and_report_print_escape_sequences_escaped(tmp_path: Path) -> None:
    argv = ["run", MODEL, "--warmup", "0", "--iters", "1", "-o", "s.json"]
    done = hybridprof(*argv, "--report", "r.txt", "--report", "r.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout)
    assert_escaped((tmp_path / "r.txt").read_text())
    printed = hybridprof("report", "s.json", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert_escaped(printed.stdout)
    rendered = hybridprof("report", "s.json", "-o", "again.txt", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert_escaped((tmp_path / "again.txt").read_text())


def test_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    argv = ["run", MODEL, "--warmup", "0", "--iters", "1", "--report", "r.csv"]
    done = hybridprof(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "r.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    cells = [cell for row in rows for cell in row.values() if cell]
    assert {"'=HYPERLINK(1+2)", "'@SUM(1+1)"} <= {row["path"] for row in rows}
    text_cells = [c for c in cells if not _number(c)]
    assert not any(c.startswith(("=", "+", "-", "@")) for c in text_cells), text_cells


def test_a_failure_message_shows_the_layer_name_escaped(tmp_path: Path) -> None:
    argv = ["run", MODEL, "--entry", "build_failing", "--warmup", "0", "--iters", "1"]
    done = hybridprof(*argv, cwd=tmp_path)
    assert done.returncode == 3
    assert not any(ch in done.stderr for ch in RAW), repr(done.stderr)
    assert "forward failed in red\\x1b[31mX\\rY (Fails): boom" in done.stderr


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
