"""hybridprof's folder in the user's cache: `$XDG_CACHE_HOME/hybridprof`, else
`~/.cache/hybridprof` (the machine's peak, the kernel maps of cached compiles)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hybridprof"


__all__ = ["cache_dir"]
