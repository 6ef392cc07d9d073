"""The history file: one SQLite database, opened with care, written append-only.

Opening checks the file before SQLite sees it: a regular, non-empty file whose first bytes are
SQLite's, no shorter than its own header says (a copy cut short is refused here, in one line,
instead of failing on some later page), whose `application_id` is hybridprof's (another program's
database is refused, never written) and whose schema is not newer than this hybridprof's (older is
migrated, in one transaction). A missing file is created only when adding: in a temporary file
beside it, then linked into place, so two jobs creating it at once both end up adding to one.

Writes run in WAL mode with a busy timeout, each add one `BEGIN IMMEDIATE` transaction: two CI
jobs adding at once wait for each other instead of failing or losing a record, and a reader (show)
never blocks a writer. The same session added twice (its identity's sha256) is recorded once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridprof.errors import HybridprofError
from hybridprof.history.fingerprint import Machine
from hybridprof.history.snapshot import LayerFigures, Snapshot
from hybridprof.history.store_schema import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    application_id,
    migrate,
    user_version,
)

DEFAULT_NAME = "hybridprof-history.sqlite"
BUSY_TIMEOUT_S = 60.0  # how long an add waits for another job's add (each takes milliseconds)
SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
_CHUNK = 900  # ids per IN (...): under SQLite's oldest limit of 999 variables


class HistoryFileError(HybridprofError):
    """The history file cannot be used: missing, foreign, corrupt, newer, or locked too long."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class CommitRef:
    """The commit a session is recorded under."""

    rev: str  # a full hash when git knew the revision, else as given
    branch: str = ""
    committed_at: int | None = None  # the committer's time (epoch s) when git knew it
    subject: str = ""  # the commit message's first line


@dataclass(frozen=True, slots=True)
class Added:
    """What an add did: recorded the session, or found it recorded already (under `rev`)."""

    added: bool
    session_id: int
    rev: str
    layers: int


@dataclass(frozen=True, slots=True)
class Series:
    """One machine x model x branch: the sessions whose times are compared with each other."""

    machine_id: int
    machine: Machine
    model: str
    branch: str
    sessions: int
    commits: int
    last_added: float  # epoch s


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session of a series, in commit order."""

    session_id: int
    commit_id: int
    rev: str
    subject: str
    committed_at: int | None
    first_added: float
    iteration_us: float | None
    stability: str


# The columns of `HistoryStore.figures`, in order.
FIGURE_COLUMNS = (
    "session_id",
    "layer_id",
    "class_name",
    "self_us",
    "self_low",
    "self_high",
    "total_us",
    "share_pct",
    "flops",
    "mem_bytes",
)


class HistoryStore:
    """An open history file. Use `open_store`; close it (or use it as a context manager)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, migrated_from: int | None) -> None:
        self.path = path
        self._conn = conn
        self.migrated_from = migrated_from  # the schema it had when opened, if it was migrated

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def add(self, snapshot: Snapshot, commit: CommitRef) -> Added:
        """Record the session under `commit` (or say where it is recorded already)."""
        with self._errors("add to"), self._write() as conn:
            found = conn.execute(
                "SELECT s.id, c.rev FROM sessions s JOIN commits c ON c.id = s.commit_id "
                "WHERE s.digest = ?",
                (snapshot.digest,),
            ).fetchone()
            if found is not None:
                return Added(False, int(found[0]), str(found[1]), len(snapshot.layers))
            session_id = self._insert_session(conn, snapshot, commit)
            ids = self._layer_ids(conn, [layer.path for layer in snapshot.layers])
            conn.executemany(
                "INSERT INTO figures (session_id, layer_id, class_name, self_us, self_low, "
                "self_high, total_us, share_pct, flops, mem_bytes) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [_figure_row(session_id, ids[f.path], f) for f in snapshot.layers],
            )
        return Added(True, session_id, commit.rev, len(snapshot.layers))

    def _insert_session(self, conn: sqlite3.Connection, snap: Snapshot, commit: CommitRef) -> int:
        now = time.time()
        machine_id = _id_of(
            conn,
            "machines",
            ("key", "cpu", "device", "torch", "threads", "label"),
            (
                snap.machine.key(),
                snap.machine.cpu,
                snap.machine.device,
                snap.machine.torch,
                snap.machine.threads,
                snap.machine.label,
            ),
        )
        commit_id = _id_of(
            conn,
            "commits",
            ("rev", "committed_at", "subject", "first_added"),
            (commit.rev, commit.committed_at, commit.subject, now),
        )
        cursor = conn.execute(
            "INSERT INTO sessions (digest, commit_id, branch, machine_id, model, model_hash, "
            "started_at, added_at, iterations, iteration_us, timing, stability) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                snap.digest,
                commit_id,
                commit.branch,
                machine_id,
                snap.model,
                snap.model_hash,
                snap.started_at,
                now,
                snap.iterations,
                snap.iteration_us,
                snap.timing,
                snap.stability,
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def _layer_ids(self, conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, int]:
        """Each path's id, the paths not recorded yet added first (looked up before inserting:
        most adds find every path recorded, and a lookup costs a third of an insert)."""
        ids = _recorded_ids(conn, paths)
        missing = [path for path in dict.fromkeys(paths) if path not in ids]
        if missing:  # this transaction holds the write lock: no one adds them meanwhile
            conn.executemany("INSERT INTO layers (path) VALUES (?)", [(p,) for p in missing])
            ids.update(_recorded_ids(conn, missing))
        return ids

    def all_series(self) -> tuple[Series, ...]:
        """Every series in the file, the one added to last first."""
        with self._errors("read"):
            rows = self._conn.execute(
                "SELECT m.id, m.cpu, m.device, m.torch, m.threads, m.label, s.model, s.branch, "
                "COUNT(*), COUNT(DISTINCT s.commit_id), MAX(s.added_at) "
                "FROM sessions s JOIN machines m ON m.id = s.machine_id "
                "GROUP BY s.machine_id, s.model, s.branch ORDER BY MAX(s.added_at) DESC, m.id"
            ).fetchall()
        return tuple(
            Series(
                machine_id=int(r[0]),
                machine=Machine(str(r[1]), str(r[2]), str(r[3]), int(r[4]), str(r[5])),
                model=str(r[6]),
                branch=str(r[7]),
                sessions=int(r[8]),
                commits=int(r[9]),
                last_added=float(r[10]),
            )
            for r in rows
        )

    def sessions_of(self, series: Series) -> list[SessionRow]:
        """The series' sessions in commit order: by the committer's time where git knew it,
        else by when the commit was first added."""
        with self._errors("read"):
            rows = self._conn.execute(
                "SELECT s.id, c.id, c.rev, c.subject, c.committed_at, c.first_added, "
                "s.iteration_us, s.stability FROM sessions s JOIN commits c ON c.id = s.commit_id "
                "WHERE s.machine_id = ? AND s.model = ? AND s.branch = ? "
                "ORDER BY COALESCE(c.committed_at, c.first_added), c.id, s.id",
                (series.machine_id, series.model, series.branch),
            ).fetchall()
        return [SessionRow(*row) for row in rows]

    def figures(
        self, session_ids: Sequence[int], columns: Sequence[str] = FIGURE_COLUMNS
    ) -> list[tuple[Any, ...]]:
        """The per-layer rows of these sessions, with these of `FIGURE_COLUMNS`."""
        unknown = set(columns) - set(FIGURE_COLUMNS)
        assert not unknown, f"no such figure: {unknown}"
        return self._select(f"SELECT {', '.join(columns)} FROM figures", session_ids)

    def window_rows(self, session_ids: Sequence[int]) -> list[tuple[int, int, float, float]]:
        """(session, layer, self time, share) of these sessions' layers, a share not measured as
        -1 (every value a number: numpy reads them at once)."""
        query = "SELECT session_id, layer_id, self_us, IFNULL(share_pct, -1.0) FROM figures"
        return self._select(query, session_ids)

    def classes(self, session_ids: Sequence[int]) -> dict[int, str]:
        """Each layer's class in the latest of these sessions that measured it."""
        query = "SELECT layer_id, class_name, MAX(session_id) FROM figures"
        rows = self._select(query, session_ids, group="layer_id")
        latest: dict[int, tuple[int, str]] = {}
        for layer_id, name, session_id in rows:  # one per layer and chunk of sessions
            if session_id >= latest.get(layer_id, (-1, ""))[0]:
                latest[layer_id] = (session_id, name)
        return {layer_id: name for layer_id, (_, name) in latest.items()}

    def _select(
        self, query: str, session_ids: Sequence[int], group: str = ""
    ) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = []
        grouped = f" GROUP BY {group}" if group else ""
        with self._errors("read"):
            for chunk in _chunks(list(session_ids)):
                marks = ",".join("?" * len(chunk))
                where = f" WHERE session_id IN ({marks}){grouped}"
                found += self._conn.execute(query + where, chunk).fetchall()
        return found

    def layer_paths(self, layer_ids: Sequence[int]) -> dict[int, str]:
        paths: dict[int, str] = {}
        with self._errors("read"):
            for chunk in _chunks(list(layer_ids)):
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT id, path FROM layers WHERE id IN ({marks})", chunk
                )
                paths.update((int(i), str(p)) for i, p in rows)
        return paths

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at its start (BEGIN IMMEDIATE): waiting for another
        writer happens here, under the busy timeout, never halfway through."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        with sqlite_errors(self.path, doing):
            yield


def _figure_row(session_id: int, layer_id: int, f: LayerFigures) -> tuple[Any, ...]:
    return (
        session_id,
        layer_id,
        f.class_name,
        f.self_us,
        f.self_low,
        f.self_high,
        f.total_us,
        f.share_pct,
        f.flops,
        f.mem_bytes,
    )


def _recorded_ids(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for chunk in _chunks(list(paths)):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT path, id FROM layers WHERE path IN ({marks})", chunk)
        ids.update((str(path), int(i)) for path, i in rows)
    return ids


def _id_of(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], values: tuple[Any, ...]
) -> int:
    """The id of the row whose first column is values[0], inserted with `values` if absent."""
    marks = ",".join("?" * len(columns))
    conn.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)
    row = conn.execute(f"SELECT id FROM {table} WHERE {columns[0]} = ?", (values[0],)).fetchone()
    return int(row[0])


def _chunks(values: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


@contextlib.contextmanager
def sqlite_errors(path: Path, doing: str) -> Iterator[None]:
    """SQLite's errors as one line that names the file and what to do."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise HistoryFileError(
                f"cannot {doing} history '{path}': another process held it for over "
                f"{BUSY_TIMEOUT_S:g} s; try again when it is done"
            ) from exc
        raise HistoryFileError(_unreadable(path, doing, exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise HistoryFileError(_unreadable(path, doing, exc)) from exc


def _unreadable(path: Path, doing: str, exc: Exception) -> str:
    return (
        f"cannot {doing} history '{path}': {exc} (a damaged or cut-short copy?); it was left as "
        "it is: restore it from your cache or artifact, or give another --db"
    )


def open_store(path: Path, create: bool = False) -> HistoryStore:
    """The history at `path`, checked (and migrated); created when absent if `create`."""
    if not path.exists():
        if not create:
            raise HistoryFileError(
                f"no history at '{path}'; add sessions first (hybridprof history add "
                "SESSION.json --db PATH), or give the file with --db"
            )
        _create(path)
    check_file(path)
    with sqlite_errors(path, "open"):
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            migrated = _check_and_migrate(conn, path)
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
    return HistoryStore(path, conn, migrated)


def _check_and_migrate(conn: sqlite3.Connection, path: Path) -> int | None:
    """Refuse another program's file or a newer schema; migrate an older one (None: as is)."""
    if application_id(conn) != APPLICATION_ID:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        what = f"tables: {', '.join(tables[:5])}" if tables else "no tables"
        raise HistoryFileError(
            f"'{path}' is an SQLite database of another program ({what}), not a hybridprof "
            "history; it was left as it is: give another --db"
        )
    version = user_version(conn)
    if version > SCHEMA_VERSION:
        raise HistoryFileError(
            f"history '{path}' has schema {version}, newer than this hybridprof reads (up to "
            f"{SCHEMA_VERSION}); upgrade hybridprof (pip install -U hybridprof)"
        )
    if version == SCHEMA_VERSION:
        return None
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = migrate(conn)  # reads the version again: another job may have migrated it
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found if found < SCHEMA_VERSION else None


def check_file(path: Path) -> None:
    """Refuse, in one line, what is not a whole SQLite file (before SQLite reads a page)."""
    try:
        info = path.stat()
        with path.open("rb") as file:
            header = file.read(_HEADER_BYTES)
    except OSError as exc:
        raise HistoryFileError(f"cannot read history '{path}': {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise HistoryFileError(f"history '{path}' is not a regular file; give the .sqlite file")
    if not header.startswith(SQLITE_MAGIC) or len(header) < _HEADER_BYTES:
        what = "empty (0 bytes)" if not header else "not an SQLite file"
        raise HistoryFileError(
            f"'{path}' is {what}, not a hybridprof history; it was left as it is: give another "
            "--db (a new file is made where none exists)"
        )
    expected = _size_in_header(header)
    if expected is not None and info.st_size < expected:
        raise HistoryFileError(
            f"history '{path}' is truncated: {info.st_size:,} bytes of the {expected:,} its header "
            "counts (a copy cut short?); it was left as it is: restore it from your cache or "
            "artifact, or give another --db"
        )


def _size_in_header(header: bytes) -> int | None:
    """The file size SQLite's header vouches for (None where it vouches for none: a writer of
    before 2010 left the count unset)."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]
    return pages * page_size if pages and valid else None


def _create(path: Path) -> None:
    """A new history at `path`, made whole in a temporary file beside it and then linked into
    place: a reader never sees half a schema, and when two processes create it at once, one
    link wins and the other process opens the winner's file."""
    if not path.parent.is_dir():
        raise HistoryFileError(f"folder '{path.parent}' of history '{path}' does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=".hybridprof-history-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise HistoryFileError(f"cannot create history '{path}': {exc.strerror}") from exc
    os.close(fd)
    temporary = Path(name)
    try:
        _build(temporary)
        os.chmod(temporary, 0o666 & ~_umask())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    except OSError as exc:
        raise HistoryFileError(f"cannot create history '{path}': {exc.strerror}") from exc
    finally:
        for leftover in (temporary, Path(f"{name}-wal"), Path(f"{name}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _build(file: Path) -> None:
    conn = sqlite3.connect(file, isolation_level=None)
    try:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA journal_mode = WAL")  # kept in the file: every later opener uses it
        conn.execute("BEGIN IMMEDIATE")
        migrate(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = [
    "BUSY_TIMEOUT_S",
    "DEFAULT_NAME",
    "FIGURE_COLUMNS",
    "Added",
    "CommitRef",
    "HistoryFileError",
    "HistoryStore",
    "Series",
    "SessionRow",
    "check_file",
    "open_store",
    "sqlite_errors",
]
