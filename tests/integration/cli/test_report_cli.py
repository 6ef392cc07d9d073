"""`hybridprof report`: a saved session re-rendered to every format, without torch, with clear
errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.cli import main
from tests.report_page import page_rows

FORMATS = ("html", "pdf", "txt", "csv", "json")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real session of a small model, saved as `hybridprof run -o` saves it."""
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 4), nn.Tanh()))
    session = profile(model, torch.rand(4, 16), warmup=1, iters=3)
    path = tmp_path_factory.mktemp("session") / "session.json"
    path.write_text(session.to_json())
    return path


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_every_format_round_trips(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = [tmp_path / f"report.{ext}" for ext in FORMATS]
    argv = ["report", str(saved)]
    for output in outputs:
        argv += ["-o", str(output)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for output in outputs:
        assert output.stat().st_size > 0 and f"report: {output}" in printed
    html, pdf, txt, csv_file, json_file = outputs
    paths = {"", "0", "1", "2", "2.0", "2.1"}  # every module of the model runs a forward
    assert set(page_rows(html.read_text())) == paths | {"(outside modules)"}
    assert pdf.read_bytes().startswith(b"%PDF")
    names = [line.split(" | ")[0].rstrip() for line in txt.read_text().splitlines()]
    for row in ("Sequential", "├── 0", "├── 1", "└── 2", "    ├── 0", "    └── 1"):
        assert row in names, row  # the tree, every layer under its parent
    assert any(name.endswith("    aten::addmm") for name in names)  # and each layer's ops
    rows = list(csv.DictReader(csv_file.open()))
    assert {row["path"] for row in rows} == paths | {"(outside modules)"}
    records = json.loads(json_file.read_text())
    assert {record["path"] for record in records} == paths | {"(outside modules)"}
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp file behind


def test_without_output_prints_the_table(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(saved), "--show-events"]) == 0
    out = capsys.readouterr().out
    assert "Sequential" in out and "aten::addmm" in out


def test_existing_output_needs_force(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "r.txt"
    output.write_text("keep")
    assert main(["report", str(saved), "-o", str(output)]) == 2
    assert "exists; pass --force" in error_line(capsys)
    assert output.read_text() == "keep"
    assert main(["report", str(saved), "-o", str(output), "--force"]) == 0
    assert output.read_text() != "keep"


def test_output_in_missing_folder_and_unknown_format(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(saved), "-o", str(tmp_path / "nope" / "r.html")]) == 2
    assert "does not exist; create it first" in error_line(capsys)
    assert main(["report", str(saved), "-o", str(tmp_path / "r.docx")]) == 2
    assert "'.docx'" in error_line(capsys)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a JSON file"),
        ('{"kind": "something-else", "schema_version": 1}', "not a hybridprof-session file"),
        ("[1, 2, 3]", "not a hybridprof-session file"),
    ],
)
def test_corrupt_or_foreign_session(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.json"
    path.write_text(content)
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 2
    assert message in error_line(capsys)
    assert not (tmp_path / "r.html").exists()


def test_newer_schema_and_missing_fields(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(saved.read_text())
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**data, "schema_version": 99}))
    assert main(["report", str(newer)]) == 2
    assert "schema version 99 is newer than this hybridprof reads" in error_line(capsys)
    del data["records"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    assert main(["report", str(broken)]) == 2
    assert "corrupt hybridprof-session file" in error_line(capsys)


def test_missing_session_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "no_such_session.json"]) == 2
    assert "session file 'no_such_session.json' not found" in error_line(capsys)


def test_report_never_imports_torch(saved: Path, tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from hybridprof.cli import main\n"
        f"code = main(['report', {str(saved)!r}, '-o', {str(tmp_path / 'r.html')!r},"
        f" '-o', {str(tmp_path / 'r.csv')!r}, '-o', {str(tmp_path / 'r.txt')!r}])\n"
        "assert code == 0, code\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not loaded, loaded[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.html").is_file()


def test_a_session_through_a_pipe_is_read(saved: Path) -> None:
    # bash's <(...) hands over /dev/fd/63, a pipe: a session file that is no regular file
    script = Path(sys.executable).with_name("hybridprof")
    for command in (
        f"'{script}' report <(cat '{saved}')",
        f"cat '{saved}' | '{script}' report /dev/stdin",
        f"'{script}' diff <(cat '{saved}') <(cat '{saved}')",
    ):
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stderr == ""


@pytest.mark.parametrize("depth", ["-1", "-5"])
def test_a_negative_max_depth_is_refused(
    saved: Path, depth: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(saved), "--max-depth", depth]) == 2
    assert error_line(capsys) == (
        f"hybridprof: error: --max-depth must be 0 (the root only) or more, got {depth}"
    )
    assert capsys.readouterr().out == ""
    assert main(["report", str(saved), "--max-depth", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()  # a noisy run's warning may come first
    header = next(i for i, line in enumerate(lines) if line.startswith("Module "))
    assert lines[header + 2].startswith("Sequential ")  # the root row, under the header


def test_show_events_lists_the_heaviest_ops_and_max_events_0_every_one(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--show-events` lists each layer's heaviest ops and a `... K more ops` row for the rest
    (`--max-events N`); `--max-events 0` lists every op; a negative count is refused."""
    assert main(["report", str(saved), "--show-events", "--max-events", "1"]) == 0
    few = capsys.readouterr().out
    assert "more ops (" in few
    assert main(["report", str(saved), "--show-events", "--max-events", "0"]) == 0
    every = capsys.readouterr().out
    assert "more ops" not in every and len(every.splitlines()) > len(few.splitlines())
    assert "aten::addmm" in every and "aten::linear" in every
    assert main(["report", str(saved), "--show-events", "--max-events", "-1"]) == 2
    assert "--max-events must be 0 (every op) or more, got -1" in error_line(capsys)
