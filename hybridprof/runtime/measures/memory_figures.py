"""One measured iteration's memory figures, per device, as the replay hands them to the table of
iterations (`memory_table.py`). Torch-free: the measure table holds these between iterations.

Per-layer figures are one int64 row per layer in `LAYER_BYTES`' order. Tops (`peak_live`,
`backward_peak_live`) are absolute: the step's start plus the curve's rise. The start is exact on
CUDA (the allocator's count); on the CPU it is what the run's broken-down iteration found alive
(`Breakdown`), or what the objects tell before one was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hybridprof.datamodel.memory import (
    CATEGORIES,
    LAYER_BYTES,
    MemoryBytes,
    MemoryTimeline,
    StepPeak,
)

Array = np.ndarray[Any, Any]
CATEGORY = {name: i for i, name in enumerate(CATEGORIES)}
FIELD = {name: i for i, name in enumerate(LAYER_BYTES)}
FIELDS = len(LAYER_BYTES)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """What only the allocation addresses tell (one iteration a run): the start's size and
    parts, the live set at the peak, the timeline, and which layer made each saved storage."""

    start_bytes: int
    start: MemoryBytes
    peak: StepPeak  # absolute, with categories and the allocating layers
    timeline: MemoryTimeline
    saved_alloc: dict[str, int]  # path -> bytes of saved storages its forward allocated
    outside_saved_alloc: int = 0
    notes: tuple[str, ...] = ()  # what the corrections did, and any mismatch found


@dataclass(frozen=True, slots=True)
class DeviceStep:
    """One device in one measured iteration."""

    device: str
    paths: tuple[str, ...]  # the rows of `values`
    values: Array  # int64 [len(paths), FIELDS]
    outside: Array  # int64 [FIELDS]: what ran in no profiled layer
    hidden: frozenset[str]  # layers whose saved tensors the model's own hooks took
    peak_above: int
    peak_time_us: float
    peak_phase: str
    peak_path: str | None
    peak_node: str
    allocated: int
    freed: int
    saved: int
    saved_params: int
    start_bytes: int  # live at the step's start (see the module docstring)
    start_exact: bool  # the allocator's own count (CUDA)
    breakdown: Breakdown | None = None


@dataclass(frozen=True, slots=True)
class IterationMemory:
    """The memory of one measured iteration (an `IterationMeasure`'s `memory`)."""

    devices: tuple[DeviceStep, ...]
    notes: tuple[str, ...] = ()
    broken_down: bool = False

    def device(self, name: str) -> DeviceStep | None:
        return next((d for d in self.devices if d.device == name), None)


__all__ = [
    "CATEGORY",
    "FIELD",
    "FIELDS",
    "Breakdown",
    "DeviceStep",
    "IterationMemory",
]
