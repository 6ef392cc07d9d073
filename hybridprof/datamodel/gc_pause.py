"""The cyclic garbage collector paused while big acyclic graphs of objects are built.

Reading or writing a 10,000-layer session makes a million containers, none in a cycle, and folding
a profiler's events is the same; collections that walk them all took a third of the time. The
data model's JSON and the runtime's event folding both pause it here.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection for the duration: reading or writing a 10,000-layer session
    makes a million containers, none in a cycle, and collections that walk them all took a third
    of the time; folding a profiler's events is the same (figures: benchmarks/README.md,
    "Measured in passing")."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
