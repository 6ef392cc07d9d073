"""Reading saved sessions and plans from disk with one-line errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.diff import DIFF_KIND, DiffResult
from hybridprof.errors import SessionFileError


def _read(path: str | Path, what: str) -> str:
    file = Path(path)
    if file.is_dir():
        raise SessionFileError(f"{what} file '{file}' is a folder; give the {what} .json file")
    if not file.is_file():
        raise SessionFileError(f"{what} file '{file}' not found; check the path")
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFileError(f"cannot read {what} file '{file}': {exc}") from exc


def load_session(path: str | Path) -> ProfileSession:
    """A session saved by `hybridprof run -o` (or `ProfileSession.to_json`)."""
    text = _read(path, "session")
    with _naming(path):
        return ProfileSession.from_json(text)


def load_plan(path: str | Path) -> ProfilePlan:
    """A plan saved by `hybridprof analyze -o`."""
    text = _read(path, "plan")
    with _naming(path):
        return ProfilePlan.from_json(text)


@contextlib.contextmanager
def _naming(path: str | Path) -> Iterator[None]:
    """Prefix a parse error with the file it came from: the user may have passed several."""
    try:
        yield
    except SessionFileError as exc:
        raise SessionFileError(f"{path}: {exc}") from exc


def load_diff(path: str | Path) -> DiffResult:
    """A comparison saved by `hybridprof diff --report x.json` (or `DiffResult.to_json`)."""
    text = _read(path, "diff")
    with _naming(path):
        return DiffResult.from_json(text)


def is_diff_file(path: str | Path) -> bool:
    """Does `path` hold a saved comparison (its "kind" field), rather than a session?"""
    try:
        head = Path(path).read_text(encoding="utf-8")[:200]
    except (OSError, UnicodeDecodeError):
        return False  # load_session then says what is wrong with it
    return f'"kind": "{DIFF_KIND}"' in head
