"""One measured iteration's memory, from its stopped profiler's events and the capture's records.

Every iteration: each allocation event gets its context (contexts.py), then every layer's
figures and the step's peak come from the live curve (layers.py): no address needed. One
iteration a run is also broken down with the allocation addresses (allocations.py,
lifetimes.py): what was alive at the start, what is alive at the peak by category and by
allocating layer, the timeline. That costs a walk of the profiler's event tree (~1-2 us per event),
so it is done for the first measured iteration and again only for one whose peak is higher by more
than `BREAKDOWN_GAIN` (the one a report should show), while its profiler still holds the events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from hybridprof.datamodel.memory import StepPeak
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.measures.memory_figures import Breakdown, DeviceStep, IterationMemory
from hybridprof.runtime.memory.allocations import (
    Allocations,
    EventArrays,
    TreeRows,
    alive_before,
    step_allocations,
    tree_allocations,
    with_addresses,
)
from hybridprof.runtime.memory.contexts import StepContexts, step_contexts
from hybridprof.runtime.memory.layers import Curve, layer_rows, step_peak
from hybridprof.runtime.memory.lifetimes import Lifetimes, corrected, lifetimes, peak_shares
from hybridprof.runtime.memory.records import ReplaySource, StepRecords
from hybridprof.runtime.memory.timeline import timeline

Array = np.ndarray[Any, Any]
BREAKDOWN_GAIN = 0.01


def replay(
    events: Sequence[Event],
    profiler: Any,
    records: StepRecords,
    names: Mapping[str, str],
    capture: ReplaySource,
) -> IterationMemory:
    """The iteration's memory per device, the model's device first. Events laid out in a way
    the replay does not follow (another torch) leave the iteration without memory figures and
    say why; every other figure of the run stands."""
    try:
        return _replay(events, profiler, records, names, capture)
    except Exception as exc:
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
        return IterationMemory((), (f"per-layer memory could not be worked out ({why})",))


def _replay(
    events: Sequence[Event],
    profiler: Any,
    records: StepRecords,
    names: Mapping[str, str],
    capture: ReplaySource,
) -> IterationMemory:
    arrays = EventArrays.of(events)
    contexts = step_contexts(arrays, names, records.mark_ns)
    found = step_allocations(arrays, records.mark_ns)
    primary = capture.device_type()
    order = [primary, *(d for d in found if d != primary)]
    allocations = {d: found.get(d) or _empty(d) for d in order}
    ids = {d: contexts.locate(a.thread, a.time) for d, a in allocations.items()}
    notes: list[str] = []
    tree = None
    above = _rise(allocations[primary])
    best = capture.best_above
    if best is None or above > best * (1 + BREAKDOWN_GAIN):
        tree = tree_allocations(profiler)
        if tree is None:
            notes.append(
                "this torch has no profiler event tree to read allocation addresses from: "
                "no breakdown of what was live at the peak"
            )
    steps: dict[str, DeviceStep] = {}
    for d in order:
        full = None
        if tree is not None:
            full = _broken_down(
                d, allocations[d], ids[d], tree.get(d), contexts, records, capture, d == primary
            )
            if full is None:
                notes.append(
                    f"the allocation addresses on {d} could not be matched to the events: "
                    "no breakdown of what was live at the peak there"
                )
        steps[d] = full if full is not None else _device_step(
            d, allocations[d], ids[d], contexts, records, capture, d == primary,
            _start(d, records, capture),
        )  # fmt: skip
    broken = any(step.breakdown is not None for step in steps.values())
    if broken:
        capture.best_above = above
    capture.replayed += 1
    return IterationMemory(tuple(steps[d] for d in order), tuple(notes), broken)


def _rise(alloc: Allocations) -> int:
    """The step's peak above its start as the events alone give it (what decides whether an
    iteration is broken down: the run's first is, and one whose rise beats the last one broken
    down by BREAKDOWN_GAIN)."""
    return max(0, int(np.cumsum(alloc.nbytes).max())) if len(alloc) else 0


def _start(device: str, records: StepRecords, capture: ReplaySource) -> tuple[int, bool]:
    """The bytes live at the step's start and whether that is the allocator's own count (CUDA);
    on the CPU what the last breakdown found, or what the objects tell before one was."""
    exact = records.device_start.get(device)
    if exact is not None:
        return exact, True
    found = capture.starts.get(device)
    if found is not None:
        return found, False
    return sum(k.nbytes for k in records.known.get(device, {}).values()), False


def _empty(device: str) -> Allocations:
    nothing = np.zeros(0, dtype=np.int64)
    return Allocations(device, nothing, nothing, nothing)


def _device_step(
    device: str,
    alloc: Allocations,
    ids: Array,
    contexts: StepContexts,
    records: StepRecords,
    capture: ReplaySource,
    primary: bool,
    start: tuple[int, bool],
) -> DeviceStep:
    curve = Curve(alloc.time, np.cumsum(alloc.nbytes))
    packs = [p for p in records.packs if p.device == device and not p.in_backward]
    hidden = records.hidden if primary else frozenset()
    rows, saved, saved_params = layer_rows(
        curve, alloc.nbytes, ids, contexts, packs, hidden, start[0]
    )
    peak = step_peak(curve, ids, contexts)
    at = (int(alloc.time[peak.index]) - records.mark_ns) / 1000 if peak.index >= 0 else 0.0
    return DeviceStep(
        device=capture.device_name(device),
        paths=tuple(rows.index),
        values=rows.matrix(),
        outside=np.array(rows.outside, dtype=np.int64),
        hidden=hidden,
        peak_above=peak.above,
        peak_time_us=round(at, 1),
        peak_phase=peak.context.phase,
        peak_path=peak.context.path,
        peak_node=peak.context.node,
        allocated=int(alloc.nbytes[alloc.nbytes > 0].sum()),
        freed=int(-alloc.nbytes[alloc.nbytes < 0].sum()),
        saved=saved,
        saved_params=saved_params,
        start_bytes=start[0],
        start_exact=start[1],
    )


def _broken_down(
    device: str,
    alloc: Allocations,
    ids: Array,
    tree: TreeRows | None,
    contexts: StepContexts,
    records: StepRecords,
    capture: ReplaySource,
    primary: bool,
) -> DeviceStep | None:
    """The iteration's figures on `device` again, from events with their addresses (corrected
    on the CPU), and the breakdown they allow."""
    mark = records.mark_ns
    joined = _joined(alloc, tree, mark)
    if joined is None:
        return None
    notes: list[str] = []
    if device == "cpu":
        joined, ids, notes = corrected(joined, ids, contexts, records)
    assert joined.total is not None and joined.reserved is not None
    exact = None
    if device == "cuda":
        exact = int(joined.total[0] - joined.nbytes[0]) if len(joined) else None
        exact = exact if exact is not None else records.device_start.get("cuda")
    life = lifetimes(joined, ids, records, alive_before(tree, mark) if tree else {}, exact)
    start = (life.start_bytes, exact is not None)
    step = _device_step(device, joined, ids, contexts, records, capture, primary, start)
    capture.starts[device] = life.start_bytes
    live = life.start_bytes + np.cumsum(joined.nbytes)
    peak = _peak(device, joined, live, life, contexts, step, capture, notes)
    saved_alloc, outside_saved = _saved_by_layer(life, contexts)
    breakdown = Breakdown(
        start_bytes=life.start_bytes,
        start=life.by_category(life.made < 0),
        peak=peak,
        timeline=timeline(
            joined.time,
            live,
            joined.reserved if device == "cuda" else None,
            contexts,
            mark,
            records.end_ns,
            life.start_bytes,
        ),
        saved_alloc=saved_alloc,
        outside_saved_alloc=outside_saved,
        notes=tuple(life.notes + notes),
    )
    return replace(step, breakdown=breakdown)


def _joined(alloc: Allocations, tree: TreeRows | None, mark_ns: int) -> Allocations | None:
    """The step's allocations with their addresses from the event tree (None: they could not be
    matched); without a tree, only a step that allocated nothing (its arrays empty)."""
    if tree is not None:
        return with_addresses(alloc, tree, mark_ns)
    if len(alloc):
        return None
    nothing = np.zeros(0, dtype=np.int64)
    return replace(alloc, ptr=nothing, total=nothing, reserved=nothing)


def _peak(
    device: str,
    joined: Allocations,
    live: Array,
    life: Lifetimes,
    contexts: StepContexts,
    step: DeviceStep,
    capture: ReplaySource,
    notes: list[str],
) -> StepPeak:
    """The step's peak with what was alive at it, by category and by allocating layer; what
    does not add up is said in `notes`."""
    assert joined.total is not None and joined.reserved is not None
    index = int(np.argmax(live)) if len(live) else -1
    if index >= 0 and live[index] <= life.start_bytes:
        index = -1
    alive = life.live(index)
    categories = life.by_category(alive)
    peak_live = int(live[index]) if index >= 0 else life.start_bytes
    if abs(categories.total() - peak_live) > 0.005 * max(peak_live, 1):
        notes.append(
            f"the storages found alive at the peak ({categories.total():,} B) differ from the "
            f"live bytes there ({peak_live:,} B)"
        )
    if device == "cuda" and len(live) and not np.array_equal(live, joined.total):
        worst = int(np.abs(live - joined.total).max())
        notes.append(
            f"the replayed curve differs from the caching allocator's count by up to {worst:,} B "
            "(allocations on threads the profiler does not record)"
        )

    def label(context: int) -> tuple[str, str | None]:
        found = contexts.contexts[context]
        return found.phase, found.path

    return StepPeak(
        live_bytes=peak_live,
        above_start_bytes=peak_live - life.start_bytes,
        time_us=step.peak_time_us,
        phase=step.peak_phase,
        path=step.peak_path,
        node=step.peak_node,
        iteration=capture.replayed,
        reserved_bytes=int(joined.reserved[index]) if device == "cuda" and index >= 0 else None,
        categories=categories,
        by_layer=peak_shares(life, alive, label),
    )


def _saved_by_layer(life: Lifetimes, contexts: StepContexts) -> tuple[dict[str, int], int]:
    """The bytes of saved storages each layer's forward allocated, and those allocated outside
    every layer's forward."""
    saved_alloc: dict[str, int] = {}
    outside_saved = 0
    for context, nbytes in life.saved_alloc.items():
        found = contexts.contexts[context]
        if found.phase == "forward" and found.path is not None:
            saved_alloc[found.path] = saved_alloc.get(found.path, 0) + nbytes
        else:
            outside_saved += nbytes
    return saved_alloc, outside_saved


__all__ = ["BREAKDOWN_GAIN", "replay"]
