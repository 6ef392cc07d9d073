"""What a run refuses before it starts, and how a failure reads in one line."""

from __future__ import annotations

import threading

import torch

from hybridprof.errors import NestedProfileError
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.strategies import spec_of

# The with-blocks whose steps are being counted right now, by id: between two windows of steps
# nothing is patched, and a profile started there would collide with the next window.
_BLOCKS: dict[int, str] = {}
_BLOCKS_LOCK = threading.Lock()


def block_opened(key: int, description: str) -> None:
    with _BLOCKS_LOCK:
        _BLOCKS[key] = description


def block_closed(key: int) -> None:
    with _BLOCKS_LOCK:
        _BLOCKS.pop(key, None)


def open_blocks() -> tuple[str, ...]:
    """The with-blocks open right now in this process (the test suite asserts there are none)."""
    with _BLOCKS_LOCK:
        return tuple(_BLOCKS.values())


def refuse_nesting(strategy_name: str) -> None:
    """NestedProfileError when another profile is running: the inner would empty the outer."""
    patched = live_patches()
    active = [f"patched: {', '.join(patched[:3])}"] if patched else list(open_blocks()[:1])
    if active:
        raise NestedProfileError(
            f"another hybridprof profile is active in this process ({active[0]}); profile "
            "after it ends, not inside it"
        )
    if spec_of(strategy_name).torch_profiler and torch.autograd._profiler_enabled():
        raise NestedProfileError(
            "torch.profiler (or torch.autograd.profiler) is already running in this thread, and "
            f"strategy '{strategy_name}' runs its own, which cannot nest: profile outside that "
            "block, or use strategy 'timer' inside it"
        )


def first_line(exc: BaseException) -> str:
    """An exception as one line: its message's first line, with its type unless a RuntimeError."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}); a forward must return or raise"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:  # "backend='be' raised:" and, next, what it raised
        text = f"{text} {lines[1]}"
    if not isinstance(exc, RuntimeError) or not text:
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    # torch's first line can carry its C++ frames (thousands of characters): the error that
    # quotes it must stay a line a person reads.
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 3] + "..."


MAX_QUOTED_CHARS = 300
