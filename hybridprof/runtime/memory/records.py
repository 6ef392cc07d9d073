"""What the memory capture notes in one measured step, as data: what the replay works from.

Torch-free: the capture (capture.py) fills these in around each measured step, and the replay
(replay.py, lifetimes.py, layers.py) reads them once the step's events are in. `ReplaySource` is
what the replay reads and keeps of the capture across iterations (which iteration was broken
down, what was alive at the start), so that neither module imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

CUDA_BLOCK = 512  # the caching allocator hands out multiples of 512 bytes (at least 512)


@dataclass(frozen=True, slots=True)
class Known:
    """A storage alive at the step's start whose role the objects tell."""

    nbytes: int
    category: int  # index into datamodel.memory.CATEGORIES


@dataclass(frozen=True, slots=True)
class Pack:
    """One tensor saved for backward: its storage, the innermost layer call then (None: in no
    profiled layer), when (time.time_ns, the profiler's clock too), and whether it is a parameter
    or buffer, or was saved inside a backward pass (a forward recomputed by checkpointing)."""

    ptr: int
    nbytes: int
    path: str | None
    time_ns: int
    parameter: bool
    in_backward: bool
    device: str  # device type: "cpu", "cuda"


@dataclass(frozen=True, slots=True)
class StepRecords:
    """Everything the capture noted in one measured step (see the module docstring)."""

    mark_ns: int
    end_ns: int
    packs: tuple[Pack, ...]
    grads: tuple[tuple[int, int, int, str], ...]  # ptr, nbytes, time_ns, device type
    known: dict[str, dict[int, Known]]  # device type -> ptr -> the storage
    deaths: dict[int, int]  # CPU: ptr -> time_ns a known mortal storage died
    optimizer_after: dict[str, dict[int, int]]  # device type -> ptr -> nbytes, after the step
    hidden: frozenset[str]  # layers that ran under the model's own saved-tensor hooks
    device_start: dict[str, int] = field(default_factory=dict)  # CUDA: allocated at the start
    unseen_packs: int = 0  # saved tensors with no storage to read (sparse, subclasses)
    hooks_note: str = ""  # why nothing saved was seen, if so
    optimizers: int = 0  # how many optimizers the caller named


def block_size(nbytes: int, device: str) -> int:
    """The bytes the allocator spends on a storage of `nbytes` (CUDA rounds up to 512)."""
    if device != "cuda":
        return nbytes
    return max(CUDA_BLOCK, math.ceil(nbytes / CUDA_BLOCK) * CUDA_BLOCK)


class ReplaySource(Protocol):
    """What the replay reads and updates of the capture (`MemoryCapture`) across iterations."""

    best_above: int | None  # the broken-down iteration's peak above its start
    replayed: int  # measured iterations worked out so far
    starts: dict[str, int]  # device type -> bytes live at the start, as last found

    def device_type(self) -> str: ...

    def device_name(self, device: str) -> str: ...


__all__ = ["CUDA_BLOCK", "Known", "Pack", "ReplaySource", "StepRecords", "block_size"]
