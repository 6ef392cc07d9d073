"""Suite-wide fixtures: no test may leave a module patched (nor optimizer ranges installed, nor a
with-block counting steps), and profiling runs single-threaded."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

# A suite started in the background from a script (`cmd &`) inherits SIGINT ignored, and so would
# every hybridprof it starts (an ignored signal stays ignored across exec): the Ctrl-C tests need
# SIGINT delivered as a terminal delivers it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def no_module_left_patched() -> Iterator[None]:
    """Fail any test that leaves a patched forward behind: the user's model is never left
    modified."""
    yield
    from hybridprof.runtime.basics.patching import live_patches
    from hybridprof.runtime.runs.guards import open_blocks
    from hybridprof.runtime.training.hooks import live_hooks

    leftovers = live_patches()
    assert not leftovers, f"modules left patched: {leftovers}"
    assert not live_hooks(), f"training hooks left installed: {live_hooks()}"
    assert not open_blocks(), f"with-blocks left open: {open_blocks()}"
