"""Writing output files safely: check before any work, write atomically, never clobber silently."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from hybridprof.errors import OutputError


def check_output_path(path: str | Path, force: bool) -> Path:
    """Fail early (before a long run) if `path` cannot be written. Returns it as a Path."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise OutputError(f"output '{target}' is a folder; give a file name")
    if not parent.is_dir():
        raise OutputError(f"folder '{parent}' of output '{target}' does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"folder '{parent}' is not writable; choose another output path")
    if target.exists() and not force:
        raise OutputError(f"output '{target}' exists; pass --force to overwrite it")
    return target


def write_atomic(path: str | Path, data: str | bytes, force: bool = False) -> Path:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    target = check_output_path(path, force)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
