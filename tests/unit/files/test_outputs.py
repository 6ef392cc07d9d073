"""Output files: checked before work, written atomically, never clobbered without --force."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import OutputError
from hybridprof.files.outputs import atomic_file, check_output_path, current_umask, write_atomic
from hybridprof.files.own_files import replaceable_own_file
from hybridprof.reporting import write_report
from tests.sessions import small_session


def test_write_atomic_writes_and_leaves_no_temp(tmp_path: Path) -> None:
    target = write_atomic(tmp_path / "out.txt", "hello")
    assert target.read_text() == "hello"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_existing_output_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(OutputError, match="pass --force"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    write_atomic(target, b"new", force=True)
    assert target.read_text() == "new"


def test_missing_folder_and_folder_target(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        check_output_path(tmp_path / "nope" / "out.html", force=False)
    with pytest.raises(OutputError, match="is a folder"):
        check_output_path(tmp_path, force=True)


# Names hybridprof picks itself (`own`): replaced only over a regular file hybridprof wrote.

SESSION_TEXT = small_session().to_json()


def _outside(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A folder outside the output folder, with a file in it, and its contents."""
    victim = tmp_path / "victim"
    victim.mkdir(exist_ok=True)
    (victim / "precious.txt").write_text("precious\n")
    return victim, _contents(victim)


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", ["file", "dangling", "folder"])
@pytest.mark.parametrize("name", ["session.json", "report.html", "net.plan.json"])
def test_an_own_name_is_never_written_through_a_symlink(
    tmp_path: Path, name: str, kind: str
) -> None:
    victim, before = _outside(tmp_path)
    target = {"file": victim / "precious.txt", "dangling": victim / "new", "folder": victim}[kind]
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(target)
    with pytest.raises(OutputError, match=r"is a symbolic link; hybridprof never writes a name"):
        write_atomic(out / name, SESSION_TEXT, own=True)
    with pytest.raises(OutputError, match="symbolic link"):
        write_atomic(out / name, SESSION_TEXT, force=True, own=True)  # --force does not change it
    assert _contents(victim) == before
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_a_link_planted_while_writing_an_own_name_is_not_followed(tmp_path: Path) -> None:
    victim, before = _outside(tmp_path)
    own = tmp_path / "session.json"
    with pytest.raises(OutputError, match="symbolic link"), atomic_file(own, own=True) as out:
        out.write(SESSION_TEXT.encode())
        own.symlink_to(victim / "precious.txt")  # after the check, before the rename
    assert _contents(victim) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.json", "victim"]


FOREIGN = {
    "text": ("session.json", b"my own notes\n"),
    "foreign json": ("session.json", b'{"kind": "my-tool-results", "schema_version": 4}\n'),
    "a plan at a session's name": ("session.json", ProfilePlan("Net", ()).to_json().encode()),
    "json without a schema": ("net.plan.json", b'{"kind": "hybridprof-plan"}'),
    "foreign html": ("report.html", b"<!doctype html><html><body>mine</body></html>\n"),
    "a fifo": ("session.json", None),
}


@pytest.mark.parametrize("case", FOREIGN)
def test_a_file_hybridprof_did_not_write_at_an_own_name_is_kept(tmp_path: Path, case: str) -> None:
    name, content = FOREIGN[case]
    path = tmp_path / name
    if content is None:
        os.mkfifo(path)
    else:
        path.write_bytes(content)
    with pytest.raises(OutputError, match=rf"'{path}' exists and is not a"):
        write_atomic(path, SESSION_TEXT, force=True, own=True)
    if content is not None:
        assert path.read_bytes() == content


def test_an_own_file_hybridprof_wrote_is_replaced_without_force(tmp_path: Path) -> None:
    session = tmp_path / "session.json"
    session.write_text(SESSION_TEXT)
    os.chmod(session, 0o640)
    assert replaceable_own_file(session)
    write_atomic(session, SESSION_TEXT + " ", own=True)
    assert session.read_text() == SESSION_TEXT + " "
    assert stat.S_IMODE(os.stat(session).st_mode) == 0o640  # a replaced file keeps its mode
    report = write_report(small_session(), tmp_path / "report.html")
    write_report(small_session(), report, own=True)
    plan = tmp_path / "net.plan.json"
    plan.write_text(ProfilePlan("Net", ()).to_json())
    write_atomic(plan, "{}", own=True)
    assert not replaceable_own_file(tmp_path / "absent.json")


@pytest.mark.parametrize("umask", [0o077, 0o002, 0o022])
def test_a_new_output_gets_the_mode_the_umask_gives(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        made = write_atomic(tmp_path / "new.json", "{}")
        own = write_atomic(tmp_path / "own.json", "{}", own=True)
    finally:
        os.umask(old)
    for path in (made, own):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask
