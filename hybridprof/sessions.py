"""Reading saved sessions and plans from disk with one-line errors."""

from __future__ import annotations

from pathlib import Path

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.errors import SessionFileError


def _read(path: str | Path, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise SessionFileError(f"{what} file '{file}' not found; check the path")
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFileError(f"cannot read {what} file '{file}': {exc}") from exc


def load_session(path: str | Path) -> ProfileSession:
    """A session saved by `hybridprof run -o` (or `ProfileSession.to_json`)."""
    return ProfileSession.from_json(_read(path, "session"))


def load_plan(path: str | Path) -> ProfilePlan:
    """A plan saved by `hybridprof analyze -o`."""
    return ProfilePlan.from_json(_read(path, "plan"))
