"""Reading saved files: checked for their kind and size before they are read, read once, and
told apart (session or comparison) by the kind their JSON holds, whatever its layout."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from hybridprof.diff import DiffResult, diff_sessions
from hybridprof.errors import SessionFileError
from hybridprof.files.storage import MAX_FILE_BYTES, load_session, load_session_or_diff, read_text
from tests.sessions import small_session


def test_a_file_bigger_than_any_session_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(small_session().to_json())
    os.truncate(big, 3 * 1024**3)  # sparse: 3 GiB that take no disk, and no memory unread
    with pytest.raises(SessionFileError) as caught:
        load_session(big)
    assert str(caught.value) == (
        f"session file '{big}' holds 3,072 MiB, more than hybridprof writes (at most 256 MiB); "
        "give a file written by hybridprof"
    )


def test_a_device_is_refused_by_its_kind() -> None:
    with pytest.raises(SessionFileError, match="'/dev/zero' is a character device, not a session"):
        load_session("/dev/zero")  # it never ends: reading it would fill the memory


def _in_a_thread(action: object) -> object:
    """`action()` in a thread that must end within 10 s (a read that blocks fails the test)."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(action())  # type: ignore[operator]
        except Exception as exc:  # handed back to the test
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the read blocked"
    return result[0]


def test_a_fifo_nobody_writes_to_is_empty_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    error = _in_a_thread(lambda: load_session(fifo))
    assert isinstance(error, SessionFileError)
    assert str(error) == f"session file '{fifo}' is empty; give a file written by hybridprof"


def test_a_pipe_holding_a_session_is_read(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    text = small_session().to_json()

    def feed() -> None:
        with os.fdopen(write_end, "w") as pipe:
            pipe.write(text)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        loaded = _in_a_thread(lambda: load_session(f"/dev/fd/{read_end}"))
    finally:
        feeder.join()
        os.close(read_end)
    assert loaded == small_session()


def test_a_pipe_is_read_only_up_to_the_bound(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            try:
                for _ in range(3):
                    pipe.write(b" " * 1000)
            except BrokenPipeError:
                pass

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        error = _in_a_thread(lambda: read_text(f"/dev/fd/{read_end}", "session", max_bytes=1500))
    finally:
        os.close(read_end)
        feeder.join()
    assert isinstance(error, SessionFileError)
    assert "more than hybridprof writes" in str(error)
    assert MAX_FILE_BYTES == 256 * 1024 * 1024


@pytest.mark.parametrize(
    "layout",
    [
        {"separators": (",", ":")},
        {"sort_keys": True},
        {"indent": 4},
    ],
)
def test_a_saved_comparison_is_known_by_its_kind_whatever_its_layout(
    tmp_path: Path, layout: dict[str, object]
) -> None:
    diff = diff_sessions(small_session(), small_session())
    path = tmp_path / "d.json"
    path.write_text(json.dumps(json.loads(diff.to_json()), **layout))  # type: ignore[arg-type]
    assert load_session_or_diff(path) == diff
    assert isinstance(load_session_or_diff(path), DiffResult)
    (tmp_path / "s.json").write_text(json.dumps(json.loads(small_session().to_json()), indent=4))
    assert load_session_or_diff(tmp_path / "s.json") == small_session()


def test_missing_files_folders_and_bad_text_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(SessionFileError, match=r"session file '.*nope\.json' not found"):
        load_session(tmp_path / "nope.json")
    with pytest.raises(SessionFileError, match=r"is a folder; give the session \.json file"):
        load_session(tmp_path)
    (tmp_path / "latin1.json").write_bytes(b'{"kind": "\xe9"}')
    with pytest.raises(SessionFileError, match=r"is not UTF-8 text \(byte 10\)"):
        load_session(tmp_path / "latin1.json")
