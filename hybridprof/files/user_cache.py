"""hybridprof's folder in the user's cache: `$XDG_CACHE_HOME/hybridprof`, else
`~/.cache/hybridprof` (the machine's peak, the kernel maps of cached compiles)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from hybridprof.errors import OutputError
from hybridprof.files.outputs import write_atomic


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hybridprof"


def read_entries(name: str) -> dict[str, object]:
    """The entries of the JSON cache file `name` in `cache_dir()` (none where it is missing or
    damaged: a cache is measured again, never trusted half-read)."""
    try:
        data = json.loads((cache_dir() / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_entry(name: str, key: str, entry: dict[str, object]) -> None:
    """`entry` under `key` in the JSON cache file `name`, written atomically; a cache that cannot
    be written is left as it is (the figure is measured again next time)."""
    entries = read_entries(name)
    entries[key] = entry
    with contextlib.suppress(OSError, ValueError, OutputError):
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / name, json.dumps(entries, indent=1), True)


__all__ = ["cache_dir", "read_entries", "write_entry"]
