"""One profiler session's events cut into the with-block's steps, by its step ranges.

A window of steps (warm-up and active ones) runs under one profiler session; each step is a range
(`training_names.STEP_RANGE`, or `WARMUP_RANGE` for a warm-up step) on the thread that steps. An
event belongs to the step whose range was open when it started, whatever its thread (on CUDA the
backward runs on the device's autograd thread); a kernel belongs to the step of the CPU op that
launched it (it may run after that step's range has closed). Events between two steps (after
`end_step()`, before the next `begin_step()`: data loading, logging) belong to none and are
dropped, and so are a warm-up step's.

The rows of a step add up to its range's duration: everything that ran on the stepping thread is
inside it. Work on another thread within the step ran while the stepping thread waited for it
(in `backward()`), so it is taken out of the step range's own time, the outside row, rather than
counted twice.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from hybridprof.runtime.events.event_columns import Array, EventColumns
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.training_names import STEP_RANGE, WARMUP_RANGE
from hybridprof.runtime.measures.iteration import IterationMeasure

_STEP_NAMES = (STEP_RANGE, WARMUP_RANGE)


@dataclass(frozen=True, slots=True)
class StepSlice:
    """One step's events: `active` False for a warm-up step; `duration_us` its range's."""

    active: bool
    duration_us: float


def split_columns(columns: EventColumns) -> list[tuple[StepSlice, Array]] | None:
    """Each step range's events (their positions in `columns`), in start order (None: the
    session has no step ranges)."""
    codes = [i for i, name in enumerate(columns.names) if name in _STEP_NAMES]
    if not codes:
        return None
    positions = np.flatnonzero(np.isin(columns.code, codes))
    steps = positions[np.argsort(columns.start[positions], kind="stable")]
    starts, ends = columns.start[steps], columns.end[steps]
    step_of = np.searchsorted(starts, columns.start, side="right") - 1
    inside = (step_of >= 0) & (columns.start < ends[np.maximum(step_of, 0)])
    step_of = np.where(inside, step_of, -1)
    found = []
    for k, position in enumerate(steps.tolist()):
        active = columns.names[int(columns.code[position])] == STEP_RANGE
        duration = int(ends[k] - starts[k]) / 1000
        found.append((StepSlice(active, duration), np.flatnonzero(step_of == k)))
    return found


def split_events(events: list[Event]) -> list[tuple[StepSlice, list[Event]]] | None:
    """The same for events read one by one (memory or device events among them)."""
    steps = sorted((e for e in events if e.name in _STEP_NAMES), key=lambda e: e.start_ns)
    if not steps:
        return None
    starts = [e.start_ns for e in steps]
    parts: list[list[Event]] = [[] for _ in steps]
    step_of_op: dict[int, int] = {}
    kernels: list[Event] = []
    for event in events:
        if event.kind == "device":
            kernels.append(event)
            continue
        k = bisect_right(starts, event.start_ns) - 1
        if k >= 0 and event.start_ns < steps[k].end_ns:
            parts[k].append(event)
            if event.correlation_id:
                step_of_op[event.correlation_id] = k
    for kernel in kernels:
        k = step_of_op.get(kernel.linked_id, -1)
        if k >= 0:
            parts[k].append(kernel)
    return [
        (StepSlice(step.name == STEP_RANGE, (step.end_ns - step.start_ns) / 1000), part)
        for step, part in zip(steps, parts, strict=True)
    ]


def on_step_clock(measure: IterationMeasure, step: StepSlice) -> IterationMeasure:
    """A step's measure with its total the step range's duration: time other threads' events
    added beyond it (they ran while the stepping thread waited) comes out of the outside time."""
    excess = measure.total_cpu_us - step.duration_us
    if excess > 0 and measure.outside_cpu_us is not None:
        measure.outside_cpu_us = max(0.0, measure.outside_cpu_us - excess)
        step_op = measure.outside_ops.get(STEP_RANGE)
        if step_op is not None:  # the wait is in the step range's own time: it comes out there
            step_op.self_cpu_us = max(0.0, step_op.self_cpu_us - excess)
    measure.total_cpu_us = step.duration_us
    return measure


__all__ = ["StepSlice", "on_step_clock", "split_columns", "split_events"]
