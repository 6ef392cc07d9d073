"""Reading saved sessions, plans and comparisons from disk with one-line errors.

A file is checked before it is read: a regular file within `MAX_FILE_BYTES`, or a pipe (`report
<(cat s.json)`, `cat s.json | hybridprof report /dev/stdin`) read up to that bound; a folder, a
device (/dev/zero never ends) or a socket is refused by its kind. It is opened without blocking (a
FIFO nobody writes to reads as empty instead of hanging) and read once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.diff import DIFF_KIND, DiffResult
from hybridprof.diff.speedup import SPEEDUP_KIND, SpeedupSummary
from hybridprof.errors import SessionFileError

# A session of 10,000 layers is 6.5 MB; a file 40 times that is not one hybridprof wrote, and
# parsing it would take gigabytes.
MAX_FILE_BYTES = 256 * 1024 * 1024
_CHUNK = 1024 * 1024


def read_text(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The whole text of a session/plan/diff file, checked for its kind and size first."""
    file = Path(path)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SessionFileError(f"{what} file '{file}' not found; check the path") from None
    except OSError as exc:
        raise SessionFileError(f"cannot read {what} file '{file}': {exc.strerror}") from exc
    try:
        data = _read_bounded(fd, file, what, max_bytes)
    finally:
        os.close(fd)
    if not data:
        raise SessionFileError(f"{what} file '{file}' is empty; give a file written by hybridprof")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionFileError(
            f"{what} file '{file}' is not UTF-8 text (byte {exc.start}); give a file written by "
            "hybridprof"
        ) from exc


def _read_bounded(fd: int, file: Path, what: str, max_bytes: int) -> bytes:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise SessionFileError(f"{what} file '{file}' is a folder; give the {what} .json file")
    if stat.S_ISREG(mode) and os.fstat(fd).st_size > max_bytes:
        raise SessionFileError(_too_big(file, what, os.fstat(fd).st_size, max_bytes))
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise SessionFileError(f"{what} file '{file}' is {_kind(mode)}, not a {what} file")
    # Blocking from here: a pipe with a writer is waited for; one without reads as empty.
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise SessionFileError(f"cannot read {what} file '{file}': {exc.strerror}") from exc
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise SessionFileError(_too_big(file, what, size, max_bytes, more=True))
        chunks.append(chunk)


def _too_big(file: Path, what: str, size: int, bound: int, more: bool = False) -> str:
    over = "over " if more else ""
    return (
        f"{what} file '{file}' holds {over}{size / 2**20:,.0f} MiB, more than hybridprof writes "
        f"(at most {bound / 2**20:,.0f} MiB); give a file written by hybridprof"
    )


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "a special file")


def load_session(path: str | Path, ops: bool = True) -> ProfileSession:
    """A session saved by `hybridprof run -o` (or `ProfileSession.to_json`); with `ops=False`
    without its op lists (`ProfileSession.from_json`)."""
    return session_of_text(path, read_text(path, "session"), ops)


def session_of_text(path: str | Path, text: str, ops: bool = True) -> ProfileSession:
    """The session in `text`, the contents of the file at `path` (named in an error)."""
    with _naming(path):
        return ProfileSession.from_json(text, ops=ops)


def load_plan(path: str | Path) -> ProfilePlan:
    """A plan saved by `hybridprof analyze -o`."""
    text = read_text(path, "plan")
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
    text = read_text(path, "diff")
    with _naming(path):
        return DiffResult.from_json(text)


def load_session_or_diff(path: str | Path) -> ProfileSession | DiffResult | SpeedupSummary:
    """A saved session, a saved comparison or an eager-vs-compiled comparison (compare.json),
    told apart by the "kind" its JSON holds (whatever the layout: compact, indented, keys
    sorted); the file is read once (it may be a pipe)."""
    text = read_text(path, "session")
    with _naming(path):
        kind = _kind_of(text)
        if kind == DIFF_KIND:
            return DiffResult.from_json(text)
        if kind == SPEEDUP_KIND:
            return SpeedupSummary.from_json(text)
        return ProfileSession.from_json(text)


def _kind_of(text: str) -> object:
    """The top-level "kind" of a JSON text (None if it is no JSON object: the session reader then
    says what is wrong with it)."""
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(text)
        return data.get("kind") if isinstance(data, dict) else None
    return None
