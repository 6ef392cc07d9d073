"""The history file: created whole, append-only, one record per session, older schemas migrated,
and anything else (another program's database, a cut-short copy, a text file, a newer schema)
refused in one line and left byte for byte as it was; two processes adding at once lose nothing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.history.fingerprint import Machine
from hybridprof.history.snapshot import LayerFigures, Snapshot, snapshot_of
from hybridprof.history.store import (
    CommitRef,
    HistoryFileError,
    check_file,
    open_store,
)
from hybridprof.history.store_schema import APPLICATION_ID, SCHEMA_VERSION, migrate
from tests.paths import ROOT
from tests.sessions import small_session

MACHINE = Machine("Test CPU (2 logical cores)", "cpu", "2.13.0+cpu", 1)


def snapshot(tag: str, layers: int = 3, flops: int | None = None) -> Snapshot:
    figures = tuple(
        LayerFigures(f"blocks.{i}.fc", "Linear", 100.0 + i, 95.0 + i, 105.0 + i, flops=flops)
        for i in range(layers)
    )
    return Snapshot(tag, "net.py:Net", None, MACHINE, "", 20, 500.0, "cpu", "stable", figures)


def test_a_session_is_recorded_once_with_its_figures(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    snap = snapshot_of(small_session())
    with open_store(db, create=True) as store:
        first = store.add(snap, CommitRef("abc", "main", 1_700_000_000, "subject"))
        again = store.add(snap, CommitRef("def", "main"))
        (series,) = store.all_series()
        sessions = store.sessions_of(series)
        figures = store.figures([s.session_id for s in sessions])
    assert first.added and not again.added and again.rev == "abc"
    assert (series.model, series.branch, series.sessions, series.commits) == (
        "nets.py:Net",
        "main",
        1,
        1,
    )
    assert [(f[2], f[3]) for f in figures] == [
        ("Linear", 520.0),
        ("ReLU", 100.0),
        ("Linear", 300.0),
    ]


def test_records_cannot_be_changed_or_removed(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with open_store(db, create=True) as store:
        store.add(snapshot("a"), CommitRef("abc"))
    conn = sqlite3.connect(db)
    for statement in ("UPDATE figures SET self_us = 1", "DELETE FROM sessions"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    conn.close()


def test_commits_are_ordered_by_their_time_where_git_knew_it(tmp_path: Path) -> None:
    with open_store(tmp_path / "h.sqlite", create=True) as store:
        store.add(snapshot("late"), CommitRef("bbb", committed_at=2_000))
        store.add(snapshot("early"), CommitRef("aaa", committed_at=1_000))
        (series,) = store.all_series()
        assert [s.rev for s in store.sessions_of(series)] == ["aaa", "bbb"]


def _unchanged_refusal(path: Path, match: str) -> None:
    before = path.read_bytes()
    with pytest.raises(HistoryFileError, match=match) as caught:
        open_store(path, create=True)
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == before


def test_another_programs_database_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    _unchanged_refusal(db, r"another program \(tables: customers\)")


def test_a_text_file_and_an_empty_file_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n" * 20)
    _unchanged_refusal(text, "not an SQLite file")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    _unchanged_refusal(empty, r"empty \(0 bytes\)")


def test_a_truncated_history_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with open_store(db, create=True) as store:
        for i in range(40):
            store.add(snapshot(f"s{i}", layers=50), CommitRef(f"c{i}"))
    size = db.stat().st_size
    assert size > 8 * 4096  # several pages, all in the file once the last connection closed
    with db.open("r+b") as file:
        file.truncate(size // 2)
    _unchanged_refusal(db, f"truncated: {size // 2:,} bytes of the {size:,}")


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    open_store(db, create=True).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    _unchanged_refusal(db, f"schema {SCHEMA_VERSION + 1}, newer than this hybridprof reads")


def _version_1_history(db: Path) -> None:
    """A file as the first schema wrote it, with one session recorded the first schema's way."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    migrate(conn, to_version=1)
    conn.execute("INSERT INTO machines VALUES (1, 'k', 'cpu x', 'cpu', '2.13', 1, '')")
    conn.execute("INSERT INTO commits VALUES (1, 'old', NULL, '', 1.0)")
    conn.execute("INSERT INTO layers VALUES (1, 'fc')")
    conn.execute(
        "INSERT INTO sessions VALUES (1, 'd', 1, '', 1, 'net.py:Net', NULL, '', 1.0, 20, 9.0, "
        "'cpu', 'stable')"
    )
    conn.execute("INSERT INTO figures VALUES (1, 1, 'Linear', 7.0, NULL, NULL, 8.0, 50.0)")
    conn.execute("COMMIT")
    conn.close()


def test_a_history_of_the_first_schema_is_migrated_and_keeps_its_records(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _version_1_history(db)
    with open_store(db) as store:
        assert store.migrated_from == 1
        store.add(snapshot("new", flops=1234), CommitRef("new"))
        (series, *_) = store.all_series()
        old = next(s for s in store.all_series() if s.machine.cpu == "cpu x")
        assert [f[3] for f in store.figures([store.sessions_of(old)[0].session_id])] == [7.0]
        rows = store.figures([store.sessions_of(series)[0].session_id])
        assert {f[8] for f in rows} == {1234}  # version 2's column
    with open_store(db) as store:
        assert store.migrated_from is None


def test_a_missing_history_is_not_created_for_reading(tmp_path: Path) -> None:
    with pytest.raises(HistoryFileError, match="no history at"):
        open_store(tmp_path / "none.sqlite")
    assert not (tmp_path / "none.sqlite").exists()


def test_creation_leaves_no_temporary_file(tmp_path: Path) -> None:
    open_store(tmp_path / "h.sqlite", create=True).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.sqlite"]
    check_file(tmp_path / "h.sqlite")


ADDER = """
import sys
from pathlib import Path
from hybridprof.history.store import CommitRef, open_store
from tests.unit.history.test_store import snapshot
tag = sys.argv[2]
with open_store(Path(sys.argv[1]), create=True) as store:
    for i in range(500):
        store.add(snapshot(f"{tag}-{i}", layers=4), CommitRef(f"commit-{i % 50}", "main"))
"""


@pytest.mark.slow
def test_two_processes_adding_500_sessions_each_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"  # not there yet: both processes race to create it too
    procs = [
        subprocess.Popen([sys.executable, "-c", ADDER, str(db), tag], cwd=ROOT)
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    conn = sqlite3.connect(db)
    digests = [row[0] for row in conn.execute("SELECT digest FROM sessions")]
    assert len(digests) == 1000 and len(set(digests)) == 1000
    assert conn.execute("SELECT COUNT(*) FROM figures").fetchone() == (4000,)
    assert conn.execute("SELECT COUNT(*) FROM commits").fetchone() == (50,)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
