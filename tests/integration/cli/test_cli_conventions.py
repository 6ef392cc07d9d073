"""A first run without surprises: the command line's conventions, through the installed command.

Each test names the item of the first-run review it answers. Exit codes and streams are checked on
a real subprocess, as a user (or a shell script) sees them.
"""

from __future__ import annotations

import ctypes.util
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof import __version__
from hybridprof.cli import main
from hybridprof.cli.terminal import wall_time
from hybridprof.datamodel import ProfilePlan, ProfileSession
from tests.paths import FIXTURES

SMALL = FIXTURES / "run_small.py"
SCRIPT = Path(sys.executable).with_name("hybridprof")
QUICK = ["--warmup", "0", "--iters", "1"]


def hp(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, argv)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# 1. Options never swallow the model file; nothing is profiled silently in its place.


def test_paths_before_the_model_file_does_not_swallow_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--paths", "features.0", str(SMALL), *QUICK, "-o", "s.json"]) == 0
    session = ProfileSession.from_json((tmp_path / "s.json").read_text())
    assert session.model_file == str(SMALL)
    assert session.plan.selected_paths() == ("features.0",)
    assert "bundled" not in capsys.readouterr().out


def test_paths_repeat_or_take_commas(tmp_path: Path) -> None:
    argv = ["run", str(SMALL), *QUICK, "--paths", "features.0", "--paths", "norm,classifier.*"]
    assert main([*argv, "-o", "s.json"]) == 0
    session = ProfileSession.from_json((tmp_path / "s.json").read_text())
    assert set(session.plan.selected_paths()) == {
        "features.0", "norm", "classifier.0", "classifier.1", "classifier.2"
    }  # fmt: skip


def test_the_demo_says_it_is_the_demo(tmp_path: Path) -> None:
    done = hp("run", *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "hybridprof: no model file given: profiling the bundled AlexNet-like demo "
        "(hybridprof run net.py profiles yours)"
    )


# 2. analyze prints the plan every time; saves to hybridprof-out/ by default, replacing its file.


def test_analyze_twice_prints_the_plan_both_times(tmp_path: Path) -> None:
    model = tmp_path / "models" / "net.py"
    model.parent.mkdir()
    shutil.copy(FIXTURES / "resnet_like.py", model)
    first = hp("analyze", model, cwd=tmp_path)
    second = hp("analyze", model, cwd=tmp_path)
    for done in (first, second):
        assert done.returncode == 0, done.stderr
        assert "plan for TinyResNet" in done.stdout
        assert "plan saved to hybridprof-out/net.plan.json" in done.stdout
    assert "replaced" not in first.stdout
    notes = [line for line in second.stdout.splitlines() if "replaced" in line]
    assert notes == [
        "hybridprof: replaced hybridprof-out/net.plan.json from an earlier run (hybridprof reuses "
        "its own file names; files you name need --force)"
    ]
    assert files_in(model.parent) == ["net.py"]  # nothing written beside the model file
    assert ProfilePlan.from_json((tmp_path / "hybridprof-out" / "net.plan.json").read_text())


def test_analyze_output_you_name_needs_force(tmp_path: Path) -> None:
    (tmp_path / "mine.json").write_text("keep")
    refused = hp("analyze", FIXTURES / "stacked_net.py", "-o", "mine.json", cwd=tmp_path)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert refused.stdout == "" and (tmp_path / "mine.json").read_text() == "keep"
    forced = hp("analyze", FIXTURES / "stacked_net.py", "-o", "mine.json", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "plan for StackedNet" in forced.stdout


# 3. A run saves its session by default; own names are replaced with one line, yours need --force.


def test_run_of_a_model_file_saves_session_and_report_in_hybridprof_out(tmp_path: Path) -> None:
    done = hp("run", SMALL, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert files_in(tmp_path) == [
        "hybridprof-out", "hybridprof-out/report.html", "hybridprof-out/session.json"
    ]  # fmt: skip
    assert "session: hybridprof-out/session.json" in done.stdout
    again = hp("run", SMALL, *QUICK, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    notes = [line for line in again.stdout.splitlines() if "replaced" in line]
    assert len(notes) == 1 and "hybridprof-out/session.json, hybridprof-out/report.html" in notes[0]


def test_run_with_a_report_saves_the_session_beside_it(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    done = hp("run", SMALL, *QUICK, "--report", "out/net.txt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert files_in(tmp_path) == ["out", "out/net.session.json", "out/net.txt"]
    assert "session: out/net.session.json" in done.stdout
    refused = hp("run", SMALL, *QUICK, "--report", "out/net.txt", cwd=tmp_path)
    assert refused.returncode == 2
    assert (
        refused.stderr
        == "hybridprof: error: output 'out/net.txt' exists; pass --force to overwrite it\n"
    )


def test_where_the_session_goes_when_you_name_some_outputs(tmp_path: Path) -> None:
    assert main(["run", str(SMALL), *QUICK, "-o", "s.json"]) == 0
    assert files_in(tmp_path) == ["s.json"]  # you named the session: no report of our choosing
    assert main(["run", str(SMALL), *QUICK, "--report", "r.txt", "--out-dir", "d"]) == 0
    assert files_in(tmp_path) == ["d", "d/session.json", "r.txt", "s.json"]


# 5. --static-only never guesses an entry the plan would then fail on.


def test_static_only_without_the_entry_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "no_entry.py"
    model.write_text(
        "from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n\n"
        "def make():\n    return Net()\n"
    )
    done = hp("analyze", "--static-only", model, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "hybridprof: error: entry 'build_model' not found in no_entry.py; callables there: Net, "
        "make; give --entry NAME (a function returning the model)\n"
    )
    assert files_in(tmp_path) == ["no_entry.py"]
    assert main(["analyze", "--static-only", str(model), "--entry", "make", "-o", "p.json"]) == 0
    assert main(["run", "--plan", "p.json", "--input-shape", "1,2", *QUICK, "-o", "s.json"]) == 0


# 6. `-o -` is standard output, never a file named '-'.


def test_dash_means_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = hp("analyze", "--static-only", FIXTURES / "stacked_net.py", "-o", "-", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert ProfilePlan.from_json(plan.stdout).root_class == "StackedNet"
    run = hp("run", SMALL, *QUICK, "-o", "-", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    session = ProfileSession.from_json(run.stdout)
    assert session.record("features.0.fc") is not None
    assert "features" in run.stderr  # the table goes to stderr when stdout carries the session
    assert files_in(tmp_path) == []
    (tmp_path / "s.json").write_text(run.stdout)
    assert main(["report", "s.json", "-o", "-"]) == 0
    assert "features" in capsys.readouterr().out
    assert files_in(tmp_path) == ["s.json"]


# 7. A refused command leaves nothing behind.


@pytest.mark.parametrize(
    "argv",
    [["--report", "out.docx"], ["--out-dir", "new/deeper", "--report", "r.docx"], ["--iters", "0"]],
)
def test_refused_run_creates_nothing(tmp_path: Path, argv: list[str]) -> None:
    done = hp("run", *argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("hybridprof: error: ")
    assert files_in(tmp_path) == []


def test_failed_run_creates_no_output_folder(tmp_path: Path) -> None:
    assert main(["run", str(FIXTURES / "run_bad_shape.py"), *QUICK]) == 3
    assert files_in(tmp_path) == []


# 8. Help: conventions of pip and argparse.


def test_bare_command_prints_help_on_stdout_and_exits_0(tmp_path: Path) -> None:
    done = hp(cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: hybridprof [-h] [-V] <command> [options]")
    assert "-h, --help" in done.stdout and "-V, --version" in done.stdout
    assert __version__ not in done.stdout  # the version is --version's, not glued to the usage
    assert hp("--help", cwd=tmp_path).stdout == done.stdout
    assert hp("--version", cwd=tmp_path).stdout == f"hybridprof {__version__}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--versoin"], "unknown option '--versoin'; did you mean '--version'?"),
        (["rnu"], "unknown command 'rnu'; did you mean 'run'?"),
        (["net.py"], "unknown command 'net.py'; did you mean 'hybridprof run net.py'?"),
        (["run", "--itres", "5"], "unrecognized arguments: --itres (did you mean --iters?)"),
    ],
)
def test_misspellings_get_a_suggestion(tmp_path: Path, argv: list[str], message: str) -> None:
    done = hp(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("hybridprof: error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr


@pytest.mark.parametrize("command", ["analyze", "run", "report"])
def test_command_help_is_on_stdout_with_exit_0(tmp_path: Path, command: str) -> None:
    done = hp(command, "-h", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith(f"usage: hybridprof {command}")
    assert "-h, --help" in done.stdout


# 9. Said once and said plainly: Ctrl-C, a fast model's time, compat internals.


def test_ctrl_c_is_said_once(tmp_path: Path) -> None:
    argv = ["run", FIXTURES / "run_interrupt.py", "--warmup", "1", "--iters", "10", "-o", "s.json"]
    done = hp(*argv, cwd=tmp_path)
    assert done.returncode == 130
    said = (done.stdout + done.stderr).count("interrupted after")
    assert said == 1, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        "hybridprof: interrupted after 2 of 10 iterations; partial session saved to s.json"
    ]


def test_a_fast_run_reports_milliseconds_not_zero_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(SMALL), *QUICK, "-o", "s.json"]) == 0
    summary = next(line for line in capsys.readouterr().out.splitlines() if " in all)" in line)
    assert re.search(r"; (\d+ ms|\d+\.\d s|under 1 ms) in all\), ", summary), summary
    assert wall_time(0.0004) == "under 1 ms" and wall_time(0.042) == "42 ms"
    assert wall_time(2.46) == "2.5 s"


def test_analyze_shows_compat_only_when_verbose_and_always_saves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(FIXTURES / "stacked_net.py")
    assert main(["analyze", model, "-o", "p.json"]) == 0
    plain = capsys.readouterr().out
    assert main(["analyze", model, "-o", "p.json", "--force", "--verbose"]) == 0
    verbose = capsys.readouterr().out
    assert "compat" not in plain and "_RecordFunctionFast" not in plain
    assert "compat (torch" in verbose
    assert json.loads((tmp_path / "p.json").read_text())["compat"]


# 4. The PDF path says what is missing when it is used (set-up may have left it out without root).


def test_pdf_output_names_the_missing_optional_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.sessions import small_session

    (tmp_path / "s.json").write_text(small_session().to_json())
    assert main(["report", "s.json", "-o", "fast.pdf"]) == 0
    found = ctypes.util.find_library("harfbuzz-subset") is not None
    assert ("libharfbuzz-subset0" in capsys.readouterr().err) is not found
    # As on a machine where set-up could not install it: weasyprint found no HarfBuzz-Subset.
    ffi = importlib.import_module("weasyprint.text.ffi")
    monkeypatch.setattr(ffi, "harfbuzz_subset", None)
    assert main(["report", "s.json", "-o", "slow.pdf"]) == 0
    assert capsys.readouterr().err == (
        "hybridprof: note: libharfbuzz-subset0 is not installed, so PDF reports render 3-5x "
        "slower; install it with: sudo apt-get install -y libharfbuzz-subset0\n"
    )
    assert (tmp_path / "slow.pdf").read_bytes().startswith(b"%PDF")
