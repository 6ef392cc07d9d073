"""`hybridprof history add` and `show` as a user runs them: real sessions of a model at two git
commits, the terminal view and the reports, the gate's exit codes, the series chosen, and
one-line refusals (exit 2, no traceback) of whatever cannot be read."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hybridprof.cli import main as hybridprof
from hybridprof.cli.history import main as history
from hybridprof.history.fingerprint import Machine
from tests.history_synthetic import MACHINE, fill_history, synthetic_history

NET = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, {width})
        self.act = nn.ReLU()
        self.head = nn.Linear({width}, 4)

    def forward(self, x):
        return self.head(self.act(self.fc(x)))


def build_model():
    return Net().eval(), (torch.rand(8, 32),)
"""
QUICK = ["--warmup", "1", "--iters", "6", "--threads", "1"]


def git(repo: Path, *argv: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True)
    return done.stdout.decode().strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_sessions_of_two_commits_are_added_and_shown(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    net = repo / "net.py"
    for n, width in enumerate((16, 64)):
        net.write_text(NET.format(width=width))
        git(repo, "add", "net.py")
        git(repo, "commit", "-q", "-m", f"width {width}")
        assert hybridprof(["run", "net.py", *QUICK, "-o", f"s{n}.json"]) == 0
    capsys.readouterr()
    assert history(["add", "s0.json", "--commit", "HEAD~1"]) == 0
    assert history(["add", "s1.json", "s1.json"]) == 0
    out = capsys.readouterr().out
    head, first = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD~1")
    assert f"added s0.json to hybridprof-history.sqlite: commit {first[:10]} (main)" in out
    assert f"s1.json is in hybridprof-history.sqlite already (commit {head[:10]})" in out
    assert history(["show", "--report", "h.html", "--report", "h.pdf"]) == 0
    out = capsys.readouterr().out
    assert "net.py:Net on " in out and "commits 1-2 of 2" in out
    assert "fc (Linear)" in out and "head (Linear)" in out and "act (ReLU)" in out
    assert (repo / "h.html").read_text().startswith("<!DOCTYPE html>")
    assert (repo / "h.pdf").read_bytes().startswith(b"%PDF")
    conn = sqlite3.connect(repo / "hybridprof-history.sqlite")
    assert conn.execute(
        "SELECT rev, subject FROM commits ORDER BY committed_at, id"
    ).fetchall() == [
        (first, "width 16"),
        (head, "width 64"),
    ]
    conn.close()


def test_add_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert history(["add", "missing.json", "--commit", "x"]) == 2
    assert "session file 'missing.json' not found" in one_error_line(capsys)
    (tmp_path / "junk.json").write_text("{}")
    assert history(["add", "junk.json", "--commit", "x"]) == 2
    one_error_line(capsys)
    from tests.sessions import small_session

    (tmp_path / "s.json").write_text(small_session().to_json())
    if (
        shutil.which("git") is not None
        and subprocess.run(
            ["git", "-C", str(tmp_path), "rev-parse"], capture_output=True
        ).returncode
    ):
        assert history(["add", "s.json"]) == 2
        assert "give --commit REV" in one_error_line(capsys)
    assert history(["add", "s.json", "--commit", "nightly 2026-12-01"]) == 0
    assert not (tmp_path / "history.sqlite").exists()
    assert "commit nightly 20" in capsys.readouterr().out
    assert history(["add", "s.json", "--commit", "a\nb"]) == 2
    one_error_line(capsys)
    assert history(["nothing"]) == 2
    assert "unknown command 'nothing'" in capsys.readouterr().err


def test_show_refuses_a_missing_damaged_or_foreign_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.sqlite"
    assert history(["show", "--db", str(missing)]) == 2
    assert "no history at" in one_error_line(capsys)
    db = tmp_path / "h.sqlite"
    fill_history(db, synthetic_history(0).values)
    size = db.stat().st_size
    with db.open("r+b") as file:
        file.truncate(size // 3)
    assert history(["show", "--db", str(db)]) == 2
    assert "is truncated" in one_error_line(capsys)
    assert db.stat().st_size == size // 3
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert history(["show", "--db", str(other), "--debug"]) == 2
    assert "another program" in capsys.readouterr().err  # with --debug: its traceback too


def test_the_gate_fails_on_a_recent_regression_of_a_chosen_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = synthetic_history(2, commits=30, environment_step=None, layer_step=None).values
    values[5, 26:] *= 1.5  # blocks.1.act, slower from commit 27 of 30
    db = tmp_path / "h.sqlite"
    fill_history(db, values)
    assert history(["show", "--db", str(db), "--fail-on-change", "blocks.1.*"]) == 1
    out = capsys.readouterr().out
    assert "gate: fail: 1 layer(s) got slower in the last 5 commits:" in out
    assert "  blocks.1.act: +" in out and "at commit 27" in out
    assert history(["show", "--db", str(db), "--fail-on-change", "blocks.0.*,head"]) == 0
    assert "gate: pass" in capsys.readouterr().out
    assert history(["show", "--db", str(db), "--fail-on-change", "*", "--recent", "3"]) == 0
    assert history(["show", "--db", str(db), "--min-change", "60%", "--fail-on-change", "*"]) == 0


def test_series_are_chosen_by_machine_model_and_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.sqlite"
    values = synthetic_history(3, commits=12).values
    fill_history(db, values)
    other = Machine("Other CPU (8 logical cores)", "cpu", "2.13.0+cpu", 8, label="big")
    fill_history(db, values * 0.5, machine=other)
    assert history(["show", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert 'on "big": Other CPU' in out.splitlines()[0]  # the series added to last
    assert f"(machine {MACHINE.key()[:8]})" in out  # the other one, named with its key
    assert history(["show", "--db", str(db), "--machine", MACHINE.key()[:6]]) == 0
    assert "on Test CPU" in capsys.readouterr().out.splitlines()[0]
    assert history(["show", "--db", str(db), "--branch", "dev"]) == 2
    assert "no series in" in one_error_line(capsys)
    assert history(["show", "--db", str(db), "--since", "nope"]) == 2
    assert "--since 'nope'" in one_error_line(capsys)
    assert history(["show", "--db", str(db), "--since", "0010", "--last", "0"]) == 0
    assert "commits 10-12 of 12" in capsys.readouterr().out


def test_reports_are_not_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.sqlite"
    fill_history(db, synthetic_history(0, commits=10).values)
    report = tmp_path / "h.html"
    report.write_text("mine")
    assert history(["show", "--db", str(db), "--report", str(report)]) == 2
    assert "--force" in one_error_line(capsys) and report.read_text() == "mine"
    assert history(["show", "--db", str(db), "--report", str(report), "--force"]) == 0
    assert history(["show", "--db", str(db), "--report", str(tmp_path / "h.txt")]) == 2
    assert "unknown extension" in one_error_line(capsys)


def test_names_with_control_characters_print_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.sqlite"
    values = np.full((2, 6), 100.0)
    fill_history(db, values, paths=["evil\x1b[2J\n:Linear", "ok:Linear"])
    assert history(["show", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\x1b[2J\\n (Linear)" in out


@pytest.mark.slow
def test_run_and_diff_run_add_to_a_history_under_their_commits(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    net = repo / "net.py"
    for width in (16, 64):
        net.write_text(NET.format(width=width))
        git(repo, "add", "net.py")
        git(repo, "commit", "-q", "-m", f"width {width}")
    assert hybridprof(["run", "net.py", *QUICK, "-o", "s.json", "--history", "h.sqlite"]) == 0
    head = git(repo, "rev-parse", "HEAD")
    assert f"history: added to h.sqlite: commit {head[:10]}, 4 layers" in capsys.readouterr().out
    diff = ["diff", "--run", "net.py", "--rev", "HEAD~1", "--rev", "HEAD", "--iters", "6"]
    assert hybridprof([*diff, "--history", "h.sqlite"]) == 0
    assert capsys.readouterr().out.count("history: added to h.sqlite") == 2
    conn = sqlite3.connect(repo / "h.sqlite")
    rows = conn.execute(
        "SELECT c.rev, s.branch FROM sessions s JOIN commits c ON c.id = s.commit_id ORDER BY s.id"
    ).fetchall()
    conn.close()
    assert rows == [(head, "main"), (git(repo, "rev-parse", "HEAD~1"), "main"), (head, "main")]
    net.write_text(NET.format(width=32))  # not committed: its figures would not be HEAD's
    assert hybridprof(["run", "net.py", *QUICK, "-o", "t.json", "--history", "h.sqlite"]) == 2
    assert "has changes not committed" in one_error_line(capsys)
    assert not (repo / "t.json").exists()
    assert hybridprof(["diff", "--run", "net.py", "--rev", "HEAD", "--history", "h.sqlite"]) == 2
    assert "two --rev" in one_error_line(capsys)
    assert hybridprof(["diff", "s.json", "s.json", "--history", "h.sqlite"]) == 2
    one_error_line(capsys)


def test_the_history_command_is_listed_and_its_help_is_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert hybridprof([]) == 0
    assert "  history        per-layer history across commits" in capsys.readouterr().out
    for argv in (["history"], ["history", "add", "-h"], ["history", "show", "-h"]):
        assert hybridprof(argv) == 0
    out = capsys.readouterr().out
    assert "bisect   find the first commit" in out and "--fail-on-change PATH" in out
    assert hybridprof(["history", "bisect", "-h"]) == 0
    assert "exit codes: 0 the first bad commit named" in " ".join(capsys.readouterr().out.split())
