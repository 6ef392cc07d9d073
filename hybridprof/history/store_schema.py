"""The history file's schema, as the chain of migrations that builds it.

A new file runs every migration from the first, an older one the migrations it lacks, so the path
an old file takes is the path every file has taken (there is no second "current schema" to drift
from it). The version is SQLite's `user_version`; the file says it is a hybridprof history by its
`application_id`, so another program's SQLite file is told apart before anything is written.

Records are append-only: triggers refuse an UPDATE or DELETE of any record table, so a script (or a
bug) cannot rewrite what was measured. Layer paths and commits are stored once and referred to by
id, so 10,000 sessions of 1,000 layers hold 10 million rows of numbers, not of paths.
"""

from __future__ import annotations

import sqlite3

APPLICATION_ID = 0x48594250  # "HYBP"
SCHEMA_VERSION = 2
RECORD_TABLES = ("machines", "commits", "layers", "sessions", "figures")

# Version 1: machines, commits, layers, sessions and their per-layer times and shares.
_V1 = (
    """CREATE TABLE machines (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        cpu TEXT NOT NULL,
        device TEXT NOT NULL,
        torch TEXT NOT NULL,
        threads INTEGER NOT NULL,
        label TEXT NOT NULL
    )""",
    """CREATE TABLE commits (
        id INTEGER PRIMARY KEY,
        rev TEXT NOT NULL UNIQUE,
        committed_at INTEGER,
        subject TEXT NOT NULL,
        first_added REAL NOT NULL
    )""",
    "CREATE TABLE layers (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)",
    """CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,
        commit_id INTEGER NOT NULL REFERENCES commits(id),
        branch TEXT NOT NULL,
        machine_id INTEGER NOT NULL REFERENCES machines(id),
        model TEXT NOT NULL,
        model_hash TEXT,
        started_at TEXT NOT NULL,
        added_at REAL NOT NULL,
        iterations INTEGER NOT NULL,
        iteration_us REAL,
        timing TEXT NOT NULL,
        stability TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_by_series ON sessions (machine_id, model, branch, commit_id)",
    """CREATE TABLE figures (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        layer_id INTEGER NOT NULL REFERENCES layers(id),
        class_name TEXT NOT NULL,
        self_us REAL NOT NULL,
        self_low REAL,
        self_high REAL,
        total_us REAL,
        share_pct REAL,
        PRIMARY KEY (session_id, layer_id)
    ) WITHOUT ROWID""",
    *(
        f"""CREATE TRIGGER {table}_{action.lower()}_refused BEFORE {action} ON {table}
        BEGIN SELECT RAISE(ABORT, 'hybridprof history records are append-only'); END"""
        for table in RECORD_TABLES
        for action in ("UPDATE", "DELETE")
    ),
)

# Version 2: FLOPs (--flops) and peak memory (--profile-memory) per layer, where measured.
_V2 = (
    "ALTER TABLE figures ADD COLUMN flops INTEGER",
    "ALTER TABLE figures ADD COLUMN mem_bytes INTEGER",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2)  # MIGRATIONS[v - 1] builds version v
assert len(MIGRATIONS) == SCHEMA_VERSION


def migrate(conn: sqlite3.Connection, to_version: int = SCHEMA_VERSION) -> int:
    """Bring the open file from its version up to `to_version` inside the caller's write
    transaction (SQLite's DDL is transactional: a failure leaves the old version whole); returns
    the version it was at."""
    found = user_version(conn)
    for version in range(found + 1, to_version + 1):
        for statement in MIGRATIONS[version - 1]:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    return found


def user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def application_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA application_id").fetchone()
    return int(row[0])


__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "RECORD_TABLES",
    "SCHEMA_VERSION",
    "application_id",
    "migrate",
    "user_version",
]
