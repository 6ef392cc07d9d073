"""Writing output files safely: check before any work, write atomically, never clobber silently.

Only regular files are ever replaced: a device node, FIFO or socket at an output path is refused
even with --force (`-o /dev/null --force` must not turn /dev/null into a JSON file). A symlink at a
name the user gave is written through (its target is replaced, the link stays); a name hybridprof
picks itself (`own`) is never written through a link and replaced only when hybridprof wrote the
file there (own_files.py). An output that is one of the run's inputs is refused. New files get the
mode the umask gives (0666 & ~umask), as any program's; a replaced file keeps its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from hybridprof.errors import OutputError
from hybridprof.files.own_files import replaceable_own_file


def check_output_path(
    path: str | Path,
    force: bool,
    inputs: Iterable[str | Path] = (),
    own: bool = False,
    replace_users: bool = False,
) -> Path:
    """Fail early (before a long run) if `path` cannot be written. Returns it as a Path.

    `own`: a name hybridprof picked itself, replaced without --force when it holds a file
    hybridprof wrote, refused when it holds anything else (--force does not change that;
    `replace_users`, a callback's overwrite=True, lets a regular file of the user's go too)."""
    target = Path(path)
    if own:
        replaceable_own_file(target, replace_users)
    real = target if own else write_target(target)
    parent = real.parent
    if real.is_dir():
        raise OutputError(f"output '{target}' is a folder; give a file name")
    _refuse_special_file(target, real)
    _refuse_inputs(target, inputs)
    if not parent.is_dir():
        raise OutputError(f"folder '{parent}' of output '{target}' does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"folder '{parent}' is not writable; choose another output path")
    if not own and os.path.lexists(target) and not force:
        raise OutputError(f"output '{target}' exists; pass --force to overwrite it")
    return target


def write_target(path: Path) -> Path:
    """Where writing `path` lands: through symlinks (the link itself is never replaced)."""
    if not os.path.islink(path):
        return path
    return Path(os.path.realpath(path))


def _refuse_special_file(target: Path, real: Path) -> None:
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"cannot check output '{target}': {exc.strerror}") from exc
    if not stat.S_ISREG(mode):
        raise OutputError(
            f"output '{target}' is {_kind(mode)}, not a regular file; hybridprof writes only "
            "regular files: give a file path"
        )


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "a special file")


def _refuse_inputs(target: Path, inputs: Iterable[str | Path]) -> None:
    for source in inputs:
        if same_file(target, Path(source)):
            raise OutputError(
                f"output '{target}' is the input '{source}'; writing it would destroy the "
                "input: give the output another name"
            )


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one file (through symlinks, `..` and hard links)."""
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def write_atomic(
    path: str | Path,
    data: str | bytes,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
    own: bool = False,
    replace_users: bool = False,
) -> Path:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path, force, inputs, own, replace_users) as handle:
        handle.write(payload)
    return Path(path)


@contextlib.contextmanager
def atomic_file(
    path: str | Path,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
    own: bool = False,
    replace_users: bool = False,
) -> Iterator[BinaryIO]:
    """A binary handle on a temp file that replaces `path` when the block ends without error.

    An own name (`own`) is checked again just before the rename, and the rename replaces the name
    itself: a link planted there meanwhile is replaced, never followed."""
    target = check_output_path(path, force, inputs, own, replace_users)
    real = target if own else write_target(target)
    mode = _mode_for(real)
    try:
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.chmod(tmp, mode)
        if own:
            replaceable_own_file(target, replace_users)
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # disk full, read-only or special file system, quota
            raise _cannot_write(target, exc) from exc
        raise


def _cannot_write(target: Path, exc: OSError) -> OutputError:
    return OutputError(f"cannot write '{target}': {exc.strerror or exc}")


def rescue_copy(data: str, stem: str) -> Path | None:
    """Save `data` in the system temp folder when it could not go where asked (None: failed too)."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"{stem}-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
    except OSError:
        return None
    return Path(name)


def _mode_for(real: Path) -> int:
    """An overwritten file keeps its permissions; a new one gets what the umask leaves of 0o666
    (mkstemp makes the temp file 0o600 whatever the umask)."""
    try:
        return stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it (Linux shows it in /proc); elsewhere set and
    put back at once."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def folder_locked(folder: Path | None) -> Iterator[None]:
    """Lock `folder` (an --out-dir) for the block; refuse if another run holds it."""
    with folders_locked([] if folder is None else [folder]):
        yield


@contextlib.contextmanager
def folders_locked(folders: Iterable[Path]) -> Iterator[None]:
    """Lock every folder a run writes into for the block; refuse if another run holds one.

    Two runs writing into one folder would leave a session from one and a report from the other.
    The lock is on the folder itself (flock): nothing is left behind, and it ends with the process.
    Each folder is locked once (two names of one folder would lock each other out), in one order.
    """
    with contextlib.ExitStack() as stack:
        for folder in _distinct_folders(folders):
            fd = os.open(folder, os.O_RDONLY)
            stack.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise OutputError(
                    f"another hybridprof run is writing into '{folder}'; wait for it to finish "
                    "or write into another folder (--out-dir, -o, --report)"
                ) from exc
        yield


def _distinct_folders(folders: Iterable[Path]) -> list[Path]:
    seen: dict[tuple[int, int], Path] = {}
    for folder in folders:
        info = os.stat(folder)
        seen.setdefault((info.st_dev, info.st_ino), folder)
    return sorted(seen.values(), key=lambda f: os.path.realpath(f))
