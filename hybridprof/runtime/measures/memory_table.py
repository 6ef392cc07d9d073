"""The measured iterations' memory, kept compactly between iterations and summarised into the
session's memory section (`datamodel.memory.MemoryProfile`).

Per device and iteration: each layer field that is not zero throughout, as one int64 array over
that iteration's layers (as measure_table.py keeps times), the step's scalars, and the
one breakdown (the latest one made: the iteration with the highest peak, see replay.py). A
layer's figure is its median over the iterations (an iteration it did not run in counts 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hybridprof.analysis.stats import median_int
from hybridprof.datamodel.measures import Stat
from hybridprof.datamodel.memory import (
    LAYER_BYTES,
    MEMORY_VERSION,
    DeviceMemory,
    LayerMemory,
    MemoryProfile,
    StepPeak,
)
from hybridprof.runtime.measures.memory_figures import (
    FIELDS,
    Breakdown,
    DeviceStep,
    IterationMemory,
)

Array = np.ndarray[Any, Any]
OUTSIDE_PATH = "(outside)"  # the row of what no profiled layer allocated (a path no module has)
METHOD = (
    "the profiler's allocation events (profile_memory) replayed against the layer ranges; saved "
    "tensors from a saved_tensors_hooks pair, each storage once"
)


@dataclass(slots=True)
class _Device:
    """One device's iterations."""

    rows: dict[str, int] = field(default_factory=dict)
    iterations: list[tuple[Array, dict[int, Array]]] = field(default_factory=list)
    outside: list[Array] = field(default_factory=list)
    steps: list[DeviceStep] = field(default_factory=list)  # with their per-layer arrays dropped
    hidden: set[str] = field(default_factory=set)
    breakdown: Breakdown | None = None
    broken_down_at: int = -1

    def add(self, step: DeviceStep, index: int) -> None:
        rows = np.array([self.rows.setdefault(p, len(self.rows)) for p in step.paths], np.int64)
        kept = {f: step.values[:, f].copy() for f in range(FIELDS) if step.values[:, f].any()}
        self.iterations.append((rows, kept))
        self.outside.append(step.outside.copy())
        self.hidden |= step.hidden
        if step.breakdown is not None:
            self.breakdown, self.broken_down_at = step.breakdown, index
        empty = np.zeros((0, FIELDS), dtype=np.int64)
        self.steps.append(replace(step, paths=(), values=empty, breakdown=None))


class MemoryTable:
    """The memory of the measured iterations, in order."""

    def __init__(self) -> None:
        self._devices: dict[str, _Device] = {}
        self._notes: dict[str, None] = {}
        self._count = 0

    def __bool__(self) -> bool:
        return self._count > 0

    def add(self, memory: IterationMemory) -> None:
        for step in memory.devices:
            device = self._devices.setdefault(step.device, _Device())
            device.add(step, self._count)
        self._notes.update(dict.fromkeys(memory.notes))
        self._count += 1

    def profile(self) -> MemoryProfile | None:
        """The session's memory section (no devices when no iteration could be worked out: its
        notes say why); None when nothing was measured."""
        if not self._count:
            return None
        devices = tuple(_summary(name, d, self._count) for name, d in self._devices.items())
        broken = [d.broken_down_at for d in self._devices.values() if d.breakdown is not None]
        return MemoryProfile(
            devices=devices,
            method=METHOD,
            version=MEMORY_VERSION,
            addressed_iteration=broken[0] if broken else None,
            notes=tuple(self._notes),
        )


def _summary(name: str, device: _Device, count: int) -> DeviceMemory:
    medians = _layer_medians(device, count)
    breakdown = device.breakdown
    saved_alloc = breakdown.saved_alloc if breakdown is not None else {}
    layers = tuple(
        _layer(path, medians[row], path in device.hidden) for path, row in device.rows.items()
    )
    if breakdown is not None:
        layers = tuple(replace(m, saved_alloc=saved_alloc.get(m.path, 0)) for m in layers)
    steps = device.steps
    starts = [s.start_bytes for s in steps]
    above = [s.peak_above for s in steps]
    outside = _layer(OUTSIDE_PATH, np.rint(np.median(device.outside, axis=0)), False)
    if breakdown is not None:
        outside = replace(outside, saved_alloc=breakdown.outside_saved_alloc)
    return DeviceMemory(
        device=name,
        start_bytes=breakdown.start_bytes if breakdown is not None else starts[0],
        start_exact=steps[0].start_exact,
        peak=breakdown.peak if breakdown is not None else _plain_peak(steps),
        peak_live_bytes=Stat.of([s + a for s, a in zip(starts, above, strict=True)]),
        peak_above_start_bytes=Stat.of(above),
        allocated_bytes=median_int([s.allocated for s in steps]),
        freed_bytes=median_int([s.freed for s in steps]),
        saved_bytes=median_int([s.saved for s in steps]),
        saved_param_bytes=median_int([s.saved_params for s in steps]),
        peak_reserved_bytes=_reserved(breakdown),
        start=breakdown.start if breakdown is not None else None,
        layers=layers,
        outside=outside,
        timeline=breakdown.timeline if breakdown is not None else None,
        notes=breakdown.notes if breakdown is not None else (),
    )


def _layer(path: str, values: Array, hidden: bool) -> LayerMemory:
    figures = dict(zip(LAYER_BYTES, (int(v) for v in values.tolist()), strict=True))
    return LayerMemory(path, saved_hidden=hidden, **figures)


def _layer_medians(device: _Device, count: int) -> Array:
    """[layer row, field]: each field's median over the iterations (0 where a layer did not
    run)."""
    rows = len(device.rows)
    out = np.zeros((rows, FIELDS), dtype=np.int64)
    for f in range(FIELDS):
        if not any(f in kept for _, kept in device.iterations):
            continue
        matrix = np.zeros((count, rows), dtype=np.int64)
        for i, (at, kept) in enumerate(device.iterations):
            values = kept.get(f)
            if values is not None:
                matrix[i, at] = values
        out[:, f] = np.rint(np.median(matrix, axis=0)).astype(np.int64)
    return out


def _reserved(breakdown: Breakdown | None) -> Stat | None:
    if breakdown is None or breakdown.peak.reserved_bytes is None:
        return None
    value = float(breakdown.peak.reserved_bytes)
    return Stat(value, value, value)


def _plain_peak(steps: list[DeviceStep]) -> StepPeak:
    """Without a breakdown: the highest iteration's peak, no categories."""
    best = max(range(len(steps)), key=lambda i: steps[i].peak_above)
    step = steps[best]
    return StepPeak(
        live_bytes=step.start_bytes + step.peak_above,
        above_start_bytes=step.peak_above,
        time_us=step.peak_time_us,
        phase=step.peak_phase,
        path=step.peak_path,
        node=step.peak_node,
        iteration=best,
    )


__all__ = ["METHOD", "MemoryTable"]
