"""How `hybridprof run` ends when the model, a signal or the disk gets in the way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hybridprof.files.storage import load_session
from tests.integration.cli_run import FIXTURES, QUICK, SCRIPT, hybridprof, measuring_run


def test_sys_exit_in_forward_is_a_model_failure(tmp_path: Path) -> None:
    done = hybridprof(
        "run", str(FIXTURES / "run_sys_exit.py"), *QUICK, "-o", "s.json", cwd=tmp_path
    )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "hybridprof: error: forward failed in 1 (Quits): it called sys.exit(0); a forward must "
        f"return or raise; at {FIXTURES / 'run_sys_exit.py'}:13 in forward"
    ]
    assert not (tmp_path / "s.json").exists()


def test_sigterm_saves_what_was_measured_and_leaves_no_temp_files(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    options = ("-o", "s.json", "--trace", "t.json")
    with measuring_run(tmp_path, *options, env={"TMPDIR": str(temp)}) as proc:
        time.sleep(0.3)  # a few more iterations
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM) after" in err and "partial session saved to s.json" in err
    assert "Traceback" not in err
    session = load_session(tmp_path / "s.json")
    assert session.interrupted and session.iterations >= 3
    assert (tmp_path / "t.json").is_file()
    assert list(temp.iterdir()) == []  # no hybridprof-trace-* folder left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready", "s.json", "t.json", "tmp"]


def test_a_report_that_cannot_be_written_names_the_cause_and_the_saved_session(
    tmp_path: Path,
) -> None:
    if not os.access("/proc", os.W_OK):
        pytest.skip("not root: /proc is refused before the run, so no write fails after it")
    argv = [
        "run",
        str(FIXTURES / "run_small.py"),
        *QUICK,
        "-o",
        "s.json",
        "--report",
        "/proc/r.txt",
    ]
    done = hybridprof(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "hybridprof: error: cannot write '/proc/r.txt': "
    )
    assert lines[0].endswith(
        "; the session is in s.json (re-render: hybridprof report s.json -o FILE)"
    )
    assert load_session(tmp_path / "s.json").iterations == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_session_that_cannot_be_written_is_kept_in_the_temp_folder(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    blocked = tmp_path / "out"
    blocked.mkdir()
    argv = [str(SCRIPT), "run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "out/s.json"]
    env = {**os.environ, "TMPDIR": str(temp)}

    def fill_the_folder() -> None:  # the folder becomes unwritable after the up-front check
        os.chmod(blocked, 0o500)

    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(0.5)  # past the output check (before torch is even imported)
        fill_the_folder()
        _, err = proc.communicate(timeout=300)
    finally:
        os.chmod(blocked, 0o700)
    if os.geteuid() == 0:
        assert proc.returncode == 0, err  # root writes into a read-only folder anyway
        pytest.skip("run as root: a read-only folder does not stop root's write")
    assert proc.returncode == 2, err
    kept = list(temp.glob("hybridprof-session-*.json"))
    assert len(kept) == 1 and load_session(kept[0]).iterations == 1
    assert err.strip() == (
        f"hybridprof: error: cannot write 'out/s.json': Permission denied; the session is in "
        f"{kept[0]} (re-render: hybridprof report {kept[0]} -o FILE)"
    )


def test_proc_as_output_folder_keeps_the_session(tmp_path: Path) -> None:
    if not os.access("/proc", os.W_OK):
        pytest.skip("not root: /proc is refused before the run, so no write fails after it")
    temp = tmp_path / "tmp"
    temp.mkdir()
    argv = [str(SCRIPT), "run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "/proc/hp.json"]
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert done.returncode == 2, done.stderr
    kept = list(temp.glob("hybridprof-session-*.json"))
    assert len(kept) == 1 and load_session(kept[0]).iterations == 1
    line = done.stderr.strip()
    assert line.startswith("hybridprof: error: cannot write '/proc/hp.json': ")
    assert line.endswith(
        f"the session is in {kept[0]} (re-render: hybridprof report {kept[0]} -o FILE)"
    )


def test_closed_stdout_still_saves(tmp_path: Path) -> None:
    argv = [str(SCRIPT), "run", str(FIXTURES / "run_small.py"), *QUICK, "-o", "s.json"]
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 0, done.stderr
    assert load_session(tmp_path / "s.json").iterations == 1


def test_an_input_shape_too_big_to_allocate_is_bad_input(tmp_path: Path) -> None:
    argv = ["run", str(FIXTURES / "run_small.py"), *QUICK, "--input-shape", "100000,100000,100000"]
    done = hybridprof(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("hybridprof: error: --input-shape '100000,100000,100000' needs ")
    assert lines[0].endswith("cannot be allocated here (RuntimeError); give a smaller shape")


def test_a_trace_holds_a_bounded_number_of_iterations(tmp_path: Path) -> None:
    from hybridprof.runtime.events.kineto import TRACE_ITERATIONS

    iters = TRACE_ITERATIONS + 3
    argv = ["run", str(FIXTURES / "run_small.py"), "--warmup", "1", "--iters", str(iters)]
    done = hybridprof(*argv, "-o", "s.json", "--trace", "t.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    names = [event.get("name") for event in trace["traceEvents"]]
    assert names.count("classifier.0") == TRACE_ITERATIONS  # one call per traced iteration
    assert "schemaVersion" in trace  # the profiler's metadata kept beside the events
    assert f"trace:   t.json  (the first {TRACE_ITERATIONS} measured iterations;" in done.stdout
    assert load_session(tmp_path / "s.json").iterations == iters
