"""Suite-wide fixtures: no test may leave a module patched, and profiling runs single-threaded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_module_left_patched() -> Iterator[None]:
    """Fail any test that leaves a patched forward behind: the user's model is never left
    modified."""
    yield
    from hybridprof.runtime.patching import live_patches

    leftovers = live_patches()
    assert not leftovers, f"modules left patched: {leftovers}"
