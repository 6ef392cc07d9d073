"""The profiler's events as the memory replay reads them: columns of the iteration's events, each
device's allocation events in the step, and (one iteration a run) their addresses.

A `[memory]` kineto event carries the time, the signed size (+ allocation, - free), the device
and the thread, but no address: that is only in the profiler's event tree
(`experimental_event_tree()`, the records torch's own `_memory_profiler` reads), with the
allocator's running totals. Both hold the same records, so sorting both on (time, thread, size)
pairs them one to one (checked: a mismatch drops the addresses, and the session says so). The
tree costs ~1-2 us per event to walk (every node becomes a Python object), so it is walked for
one iteration a run, not every one (see replay.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hybridprof.runtime.events.kineto import MEMORY_EVENT, Event

Array = np.ndarray[Any, Any]
_FIELDS = {name: i for i, name in enumerate(Event._fields)}


@dataclass(frozen=True, slots=True)
class EventArrays:
    """An iteration's events (kineto's, as `read_events` gives them) as columns."""

    names: list[str]  # per distinct name, `code` indexes it
    code: Array
    start: Array
    end: Array
    thread: Array
    seq: Array
    fwd_thread: Array
    nbytes: Array
    on_device: Array  # bool

    @classmethod
    def of(cls, events: Sequence[Event]) -> EventArrays:
        if not events:
            empty = np.zeros(0, dtype=np.int64)
            return cls([], empty, empty, empty, empty, empty, empty, empty, empty.astype(bool))
        # Every Event has the same fields: no length check (`strict=True` costs 25x the zip).
        columns = list(zip(*events, strict=False))
        names = columns[1]
        unique = list(dict.fromkeys(names))
        index = {name: i for i, name in enumerate(unique)}
        count = len(names)

        def column(field: str, kind: Any = np.int64) -> Array:
            return np.fromiter(columns[_FIELDS[field]], dtype=kind, count=count)

        return cls(
            names=unique,
            code=np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=count),
            start=column("start_ns"),
            end=column("end_ns"),
            thread=column("thread"),
            seq=column("seq"),
            fwd_thread=column("fwd_thread"),
            nbytes=column("nbytes"),
            on_device=column("on_device", bool),
        )

    def memory_mask(self) -> Array:
        code = self.names.index(MEMORY_EVENT) if MEMORY_EVENT in self.names else -1
        mask: Array = self.code == code
        return mask


@dataclass(frozen=True, slots=True)
class Allocations:
    """One device's allocation events in the step, in the order they happened (time, then the
    profiler's order): the live curve is their running sum."""

    device: str  # device type: "cpu", "cuda"
    time: Array  # int64 ns
    nbytes: Array  # int64, signed
    thread: Array
    ptr: Array | None = None  # the addresses, where read
    total: Array | None = None  # the allocator's running total after each (CUDA: absolute)
    reserved: Array | None = None  # CUDA: the caching allocator's reserved bytes after each

    def __len__(self) -> int:
        return len(self.time)


def step_allocations(arrays: EventArrays, mark_ns: int) -> dict[str, Allocations]:
    """Per device type, the allocation events from the step's start on."""
    mask = arrays.memory_mask() & (arrays.start >= mark_ns)
    found: dict[str, Allocations] = {}
    for device, on in (("cpu", False), ("cuda", True)):
        pick = np.flatnonzero(mask & (arrays.on_device == on))
        if not len(pick):
            continue
        pick = pick[np.argsort(arrays.start[pick], kind="stable")]
        found[device] = Allocations(
            device, arrays.start[pick], arrays.nbytes[pick], arrays.thread[pick]
        )
    return found


@dataclass(frozen=True, slots=True)
class TreeRows:
    """Allocation records of the event tree for one device type: the whole session's (the
    runner's warm step included), as columns."""

    time: Array
    thread: Array
    nbytes: Array
    ptr: Array
    total: Array
    reserved: Array


def tree_allocations(profiler: Any) -> dict[str, TreeRows] | None:
    """Every allocation record of a stopped profiler's event tree, per device type; None when
    this torch has no such tree (the figures then go without addresses)."""
    try:
        from torch._C._profiler import _EventType

        allocation = _EventType.Allocation
        stack = list(profiler.kineto_results.experimental_event_tree())
    except (AttributeError, ImportError, RuntimeError):
        return None
    rows: dict[str, list[tuple[int, int, int, int, int, int]]] = {}
    while stack:
        node = stack.pop()
        if node.tag == allocation:
            f = node.extra_fields
            row = (node.start_time_ns, node.start_tid, f.alloc_size, f.ptr)
            rows.setdefault(f.device.type, []).append((*row, f.total_allocated, f.total_reserved))
        else:
            stack.extend(node.children)
    found: dict[str, TreeRows] = {}
    for device, items in rows.items():
        t, tid, size, ptr, total, reserved = (
            np.array(c, dtype=np.int64) for c in zip(*items, strict=True)
        )
        found[device] = TreeRows(t, tid, size, ptr, total, reserved)
    return found


def with_addresses(step: Allocations, tree: TreeRows, mark_ns: int) -> Allocations | None:
    """The step's events with the tree's addresses and totals (None: the two do not pair)."""
    post = tree.time >= mark_ns
    t, tid, size = tree.time[post], tree.thread[post], tree.nbytes[post]
    if len(t) != len(step):
        return None
    ours = np.lexsort((step.nbytes, step.thread, step.time))
    theirs = np.lexsort((size, tid, t))
    if not (
        np.array_equal(step.time[ours], t[theirs])
        and np.array_equal(step.nbytes[ours], size[theirs])
    ):
        return None
    ptr = np.empty(len(step), dtype=np.int64)
    total = np.empty(len(step), dtype=np.int64)
    reserved = np.empty(len(step), dtype=np.int64)
    ptr[ours] = tree.ptr[post][theirs]
    total[ours] = tree.total[post][theirs]
    reserved[ours] = tree.reserved[post][theirs]
    return Allocations(step.device, step.time, step.nbytes, step.thread, ptr, total, reserved)


def alive_before(tree: TreeRows, mark_ns: int) -> dict[int, int]:
    """Address -> size of what the session allocated before the step and had not freed by its
    start (the runner's warm step's leftovers)."""
    before = np.flatnonzero(tree.time < mark_ns)
    if not len(before):
        return {}
    before = before[np.lexsort((tree.time[before], tree.ptr[before]))]
    ptr, size = tree.ptr[before], tree.nbytes[before]
    last = np.r_[ptr[1:] != ptr[:-1], True]  # the last event at each address
    alive = last & (size > 0)
    return dict(zip(ptr[alive].tolist(), size[alive].tolist(), strict=True))


__all__ = [
    "Allocations",
    "EventArrays",
    "TreeRows",
    "alive_before",
    "step_allocations",
    "tree_allocations",
    "with_addresses",
]
