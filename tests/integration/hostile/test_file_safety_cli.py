"""What `hybridprof` may write over, as a user runs it: only regular files that are not inputs."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from hybridprof.files.storage import load_session
from tests.integration.cli_run import FIXTURES, QUICK, hybridprof, measuring_run


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hybridprof: error: "), done.stderr
    return lines[0]


def test_force_never_replaces_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")
    done = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "pipe.json", "--force", cwd=tmp_path
    )
    assert done.returncode == 2
    assert "is a FIFO, not a regular file" in one_error_line(done)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe.json").st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_force_never_replaces_a_device_node(tmp_path: Path) -> None:
    # A private copy of /dev/null's node: a regression can only damage this one.
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    _session(tmp_path)
    for argv in (
        ("run", str(FIXTURES / "run_small.py"), *QUICK, "-o", str(node), "--force"),
        ("report", str(tmp_path / "s.json"), "-o", str(tmp_path / "link.txt"), "--force"),
    ):
        (tmp_path / "link.txt").unlink(missing_ok=True)
        (tmp_path / "link.txt").symlink_to(node)
        done = hybridprof(*argv, cwd=tmp_path)
        assert done.returncode == 2
        assert "is a character device, not a regular file" in one_error_line(done)
        assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_force_writes_through_a_symlink_and_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "latest.json"
    real.write_text("old")
    os.chmod(real, 0o600)
    link = tmp_path / "s.json"
    link.symlink_to(real)
    done = hybridprof("run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "s.json", cwd=tmp_path)
    assert done.returncode == 2 and "pass --force" in one_error_line(done)
    done = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "s.json", "--force", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load_session(real).iterations == 1
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o600  # an overwritten file keeps its mode
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["latest.json"]


def test_an_output_that_is_an_input_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.py"
    shutil.copy(FIXTURES / "run_small.py", victim)
    before = victim.read_bytes()
    for argv in (
        ("run", "victim.py", *QUICK, "-o", "victim.py", "--force"),
        ("run", "victim.py", *QUICK, "-o", "./sub/../victim.py", "--force"),
        ("analyze", "victim.py", "-o", "victim.py", "--force"),
    ):
        (tmp_path / "sub").mkdir(exist_ok=True)
        done = hybridprof(*argv, cwd=tmp_path)
        assert done.returncode == 2, (argv, done.stderr)
        assert "is the input" in one_error_line(done)
        assert victim.read_bytes() == before

    session = _session(tmp_path)
    saved = session.read_bytes()
    (tmp_path / "hard.json").hardlink_to(session)
    for output in ("s.json", "hard.json"):
        done = hybridprof("report", "s.json", "-o", output, "--force", cwd=tmp_path)
        assert done.returncode == 2
        assert f"output '{output}' is the input 's.json'" in one_error_line(done)
        assert session.read_bytes() == saved


def test_run_refuses_its_own_model_file_as_session(tmp_path: Path) -> None:
    # the plain case the report names: -o over the model file itself, before any torch work
    victim = tmp_path / "victim.py"
    shutil.copy(FIXTURES / "run_small.py", victim)
    done = hybridprof("run", str(victim), "-o", str(victim), "--force", cwd=tmp_path)
    assert done.returncode == 2
    assert one_error_line(done).endswith("give the output another name")
    assert victim.read_text().startswith('"""A small model')


def _session(folder: Path) -> Path:
    done = hybridprof("run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "s.json", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "s.json"


def test_two_runs_never_mix_their_files_in_one_out_dir(tmp_path: Path) -> None:
    with measuring_run(tmp_path, "--out-dir", "out") as first:
        second = hybridprof(
            "run", str(FIXTURES / "run_small.py"), *QUICK, "--out-dir", "out", cwd=tmp_path
        )
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert second.returncode == 2
    assert one_error_line(second) == (
        "hybridprof: error: another hybridprof run is writing into 'out'; wait for it to finish "
        "or write into another folder (--out-dir, -o, --report)"
    )
    assert first.returncode == 130, err
    session = load_session(tmp_path / "out" / "session.json")
    assert session.model_file is not None and session.model_file.endswith("run_signal.py")
    assert "run_signal.py" in (tmp_path / "out" / "report.html").read_text()
    again = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *QUICK, "--out-dir", "out", cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr  # the lock ends with the run


def test_two_runs_with_one_report_name_never_mix_their_files(tmp_path: Path) -> None:
    # --report x.html alone (no --out-dir): the session goes beside it, and the folder is locked
    with measuring_run(tmp_path, "--report", "x.html") as first:
        second = hybridprof(
            "run", str(FIXTURES / "run_small.py"), *QUICK, "--report", "x.html", cwd=tmp_path
        )
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert second.returncode == 2
    assert one_error_line(second).startswith(
        "hybridprof: error: another hybridprof run is writing into '.'; wait for it to finish"
    )
    assert first.returncode == 130, err
    session = load_session(tmp_path / "x.session.json")
    assert session.model_file is not None and session.model_file.endswith("run_signal.py")
    assert "run_signal.py" in (tmp_path / "x.html").read_text()


def test_an_output_made_during_the_run_refuses_it_before_any_file_is_written(
    tmp_path: Path,
) -> None:
    with measuring_run(tmp_path, "--report", "x.html") as first:
        (tmp_path / "x.html").write_text("made by someone else while the run measured")
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("hybridprof: error: output 'x.html' exists; pass --force to overwrite")
    assert "the session is in " in line
    rescued = Path(line.split("the session is in ")[1].split(" (re-render")[0])
    assert load_session(rescued).interrupted
    rescued.unlink()
    assert not (tmp_path / "x.session.json").exists()  # nothing written, not even the session
    assert (tmp_path / "x.html").read_text() == "made by someone else while the run measured"


@pytest.mark.parametrize("kind", ["file", "dangling"])
@pytest.mark.parametrize(
    ("argv", "own"),
    [
        (("run", "RUN_SMALL", *QUICK), "hybridprof-out/session.json"),
        (("run", "RUN_SMALL", *QUICK, "--out-dir", "out"), "out/report.html"),
        (("run", "RUN_SMALL", *QUICK, "--report", "net.html"), "net.session.json"),
        (("analyze", "RUN_SMALL", "--static-only"), "hybridprof-out/run_small.plan.json"),
    ],
)
def test_a_symlink_planted_at_a_name_hybridprof_picks_is_refused(
    tmp_path: Path, argv: tuple[str, ...], own: str, kind: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious")
    link = tmp_path / own
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(victim / ("precious.txt" if kind == "file" else "created"))
    command = [str(FIXTURES / "run_small.py") if a == "RUN_SMALL" else a for a in argv]
    done = hybridprof(*command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done) == (
        f"hybridprof: error: '{own}' is a symbolic link; hybridprof never writes a name it picks "
        "itself through a link: move it away, or name the output yourself (-o)"
    )
    assert [p.name for p in victim.iterdir()] == ["precious.txt"]
    assert (victim / "precious.txt").read_text() == "precious"
    assert done.stdout == ""  # refused before any work


def test_a_users_file_at_a_name_hybridprof_picks_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "session.json").write_text('{"kind": "my-tool-results", "schema_version": 4}')
    done = hybridprof(
        "run", str(FIXTURES / "run_small.py"), *QUICK, "--out-dir", "out", cwd=tmp_path
    )
    assert done.returncode == 2
    assert one_error_line(done) == (
        "hybridprof: error: 'out/session.json' exists and is not a session hybridprof wrote, so "
        "it is not replaced: move it away, or name the output yourself (-o)"
    )
    assert (out / "session.json").read_text() == '{"kind": "my-tool-results", "schema_version": 4}'
    assert sorted(p.name for p in out.iterdir()) == ["session.json"]
