"""What was alive when: each allocation's lifetime in the step, what was alive at its start, and
the category of every storage (one iteration a run, where the addresses were read).

Within a session the allocator reports every free at the address it allocated, so a free pairs
with the allocation before it at the same address (sorted by address, then order: one numpy
pass). A free with no allocation before it in the step frees something alive at the start. What
was alive at the start: the session's earlier allocations not yet freed (the runner's warm
step's), the storages the objects tell (parameters, buffers, gradients, optimizer state, inputs)
and those the step freed. On CUDA the allocator's running total gives the start exactly; the
part no object or event accounts for is "other".

Two CPU corrections (the CPU allocator reports frees only of blocks it saw allocated while
memory profiling was on, and keeps their sizes in a table entries of which can go stale): a known
storage's death seen by its weakref with no reported free near it gets a free at that time, and a
free of a known storage reported with a size other than the storage's own takes the storage's.

Categories belong to an allocation, not an address (addresses are reused within a step), so
each hook's note (a saved tensor, a gradient, an optimizer's state) is matched to the allocation
alive at that address at that time, within the clock slack of `time.time_ns()` against the
profiler's (under a microsecond; EPS_NS). Priority: parameters, buffers, gradients, optimizer
state, activations, inputs, then temporaries (made in the step) or other (alive before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hybridprof.datamodel.memory import CATEGORIES, MemoryBytes, PeakShare
from hybridprof.runtime.measures.memory_figures import CATEGORY
from hybridprof.runtime.memory.allocations import Allocations
from hybridprof.runtime.memory.contexts import StepContexts
from hybridprof.runtime.memory.records import StepRecords, block_size

Array = np.ndarray[Any, Any]
EPS_NS = 5_000  # hook clocks against the profiler's: measured within 1 us
NEAR_NS = 20_000  # a weakref's death and the allocator's free of the same storage
NEVER = np.iinfo(np.int64).max
_BIG_TIME = np.iinfo(np.int64).max
_OTHER, _TEMPORARY = CATEGORY["other"], CATEGORY["temporaries"]
PEAK_SHARES = 20  # allocating layers listed at the peak; the rest in one row


def pairs(ptr: Array, nbytes: Array) -> tuple[Array, Array]:
    """Per event: an allocation's free (its index; NEVER if it outlives the step); and the
    frees of storages alive before the step (indices, in order)."""
    count = len(ptr)
    free_of = np.full(count, NEVER, dtype=np.int64)
    if not count:
        return free_of, np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(count), ptr))
    p, d = ptr[order], nbytes[order]
    same = np.r_[False, p[1:] == p[:-1]]
    after_alloc = np.r_[False, d[:-1] > 0]
    paired = (d < 0) & same & after_alloc
    at = np.flatnonzero(paired)
    free_of[order[at - 1]] = order[at]
    return free_of, np.sort(order[(d < 0) & ~paired])


def corrected(
    step: Allocations, ids: Array, contexts: StepContexts, records: StepRecords
) -> tuple[Allocations, Array, list[str]]:
    """The CPU's events with the two corrections (see the module docstring) and what they did."""
    assert step.ptr is not None
    known = records.known.get("cpu", {})
    nbytes = step.nbytes.copy()
    _, loose = pairs(step.ptr, nbytes)
    notes: list[str] = []
    stale = 0
    freed_at: dict[int, list[int]] = {}
    for k in loose.tolist():
        ptr = int(step.ptr[k])
        freed_at.setdefault(ptr, []).append(int(step.time[k]))
        own = known.get(ptr)
        if own is not None and -nbytes[k] != own.nbytes:
            stale += own.nbytes + int(nbytes[k])
            nbytes[k] = -own.nbytes
    if stale:
        notes.append(
            "frees of storages made before the profiler started were reported with a stale size "
            f"by the CPU allocator; corrected from the storages' own sizes ({stale:+,} B)"
        )
    deaths = [
        (t, ptr, known[ptr].nbytes)
        for ptr, t in sorted(records.deaths.items(), key=lambda item: item[1])
        if ptr in known
        and records.mark_ns <= t <= records.end_ns
        and not any(abs(t - f) <= NEAR_NS for f in freed_at.get(ptr, ()))
    ]
    fixed = replace(step, nbytes=nbytes)
    if not deaths:
        return fixed, ids, notes
    notes.append(
        f"{len(deaths)} frees of storages allocated before the profiler started were not reported "
        "by the CPU allocator; taken from the storages' weakrefs"
    )
    moved, moved_ids = _with_frees(fixed, ids, contexts, deaths)
    return moved, moved_ids, notes


def _with_frees(
    step: Allocations, ids: Array, contexts: StepContexts, deaths: Sequence[tuple[int, int, int]]
) -> tuple[Allocations, Array]:
    """`step` with a free inserted at each death (time, address, size), on the thread of the
    event before it, in the context running there then."""
    time = np.array([d[0] for d in deaths], dtype=np.int64)
    at = np.searchsorted(step.time, time, side="right")
    before = np.clip(at - 1, 0, max(len(step) - 1, 0))
    thread = step.thread[before] if len(step) else np.zeros(len(time), dtype=np.int64)
    sizes = np.array([-d[2] for d in deaths], dtype=np.int64)

    def put(values: Array | None, new: Array) -> Array | None:
        return None if values is None else np.insert(values, at, new)

    carried = step.total[before] if step.total is not None and len(step) else 0 * time
    moved = Allocations(
        step.device,
        np.insert(step.time, at, time),
        np.insert(step.nbytes, at, sizes),
        np.insert(step.thread, at, thread),
        put(step.ptr, np.array([d[1] for d in deaths], dtype=np.int64)),
        put(step.total, carried + sizes),
        put(step.reserved, 0 * time),
    )
    return moved, np.insert(ids, at, contexts.locate(thread, time))


@dataclass(slots=True)
class Lifetimes:
    """Every storage alive in the step on one device: those alive at its start first
    (made = -1), then each allocation of the step (made = its event's index)."""

    size: Array
    made: Array  # event index of the allocation; -1: alive at the start
    freed: Array  # event index of its free; NEVER: alive at the end
    ptr: Array
    born_ns: Array
    died_ns: Array
    context: Array  # context id of its allocation; -1: alive at the start
    category: Array
    start_bytes: int
    notes: list[str] = field(default_factory=list)
    saved_alloc: dict[int, int] = field(default_factory=dict)  # context id -> saved bytes made
    _by_ptr: dict[int, list[int]] = field(default_factory=dict)

    def at(self, ptr: int, time_ns: int) -> int | None:
        """The storage at `ptr` alive at `time_ns` (the latest made, if the slack admits two)."""
        found = None
        for r in self._by_ptr.get(ptr, ()):
            if self.born_ns[r] <= time_ns + EPS_NS and self.died_ns[r] >= time_ns - EPS_NS:
                found = r
        return found

    def live(self, index: int) -> Array:
        """Which storages are alive just after event `index` (-1: at the start)."""
        return (self.made <= index) & (self.freed > index)

    def by_category(self, alive: Array) -> MemoryBytes:
        sums = np.bincount(self.category[alive], self.size[alive], len(CATEGORIES))
        return MemoryBytes(*(int(v) for v in np.rint(sums)))


def lifetimes(
    step: Allocations,
    ids: Array,
    records: StepRecords,
    before: dict[int, int],
    exact_start: int | None,
) -> Lifetimes:
    """The storages of the step (see `Lifetimes`), with what the objects and hooks tell."""
    assert step.ptr is not None
    device = step.device
    free_of, loose = pairs(step.ptr, step.nbytes)
    known = records.known.get(device, {})
    start: dict[int, list[int]] = {p: [size, _OTHER, int(NEVER)] for p, size in before.items()}
    for ptr, own in known.items():
        entry = start.setdefault(ptr, [own.nbytes, own.category, int(NEVER)])
        entry[1] = min(entry[1], own.category)
    extra: list[list[int]] = []  # a second storage freed at an address: alive at the start too
    for k in loose.tolist():
        ptr = int(step.ptr[k])
        found = start.get(ptr)
        if found is None:
            start[ptr] = [-int(step.nbytes[k]), _OTHER, k]
        elif found[2] == NEVER:
            found[2] = k
        else:
            extra.append([ptr, -int(step.nbytes[k]), _OTHER, k])
    rows = [[p, *e] for p, e in start.items()] + extra
    made = np.flatnonzero(step.nbytes > 0)
    life = _assemble(step, ids, rows, made, free_of)
    _start_bytes(life, exact_start)
    _categorise(life, records, device)
    return life


def _assemble(
    step: Allocations, ids: Array, rows: list[list[int]], made: Array, free_of: Array
) -> Lifetimes:
    first = np.array(rows, dtype=np.int64).reshape(-1, 4)  # ptr, size, category, freed
    freed = np.concatenate([first[:, 3], free_of[made]])
    died = np.full(len(freed), _BIG_TIME, dtype=np.int64)
    gone = freed != NEVER
    died[gone] = step.time[freed[gone]]
    life = Lifetimes(
        size=np.concatenate([first[:, 1], step.nbytes[made]]),
        made=np.concatenate([np.full(len(first), -1, dtype=np.int64), made]),
        freed=freed,
        ptr=np.concatenate([first[:, 0], step.ptr[made] if step.ptr is not None else made]),
        born_ns=np.concatenate([np.full(len(first), -_BIG_TIME, dtype=np.int64), step.time[made]]),
        died_ns=died,
        context=np.concatenate([np.full(len(first), -1, dtype=np.int64), ids[made]]),
        category=np.concatenate([first[:, 2], np.full(len(made), _TEMPORARY, dtype=np.int64)]),
        start_bytes=0,
    )
    for r, ptr in enumerate(life.ptr.tolist()):
        life._by_ptr.setdefault(ptr, []).append(r)
    return life


def _start_bytes(life: Lifetimes, exact: int | None) -> None:
    """On the CPU the start is what is known; on CUDA the allocator's count, the unknown rest
    one storage of "other"."""
    known = int(life.size[life.made < 0].sum())
    if exact is None:
        life.start_bytes = known
        return
    rest = exact - known
    if rest < 0:
        life.notes.append(
            f"the storages known at the step's start ({known:,} B, sizes rounded as the caching "
            f"allocator does) exceed its count ({exact:,} B); the start is its count"
        )
    life.start_bytes = exact
    if rest > 0:
        _add_start(life, -1, rest, _OTHER)


def _add_start(life: Lifetimes, ptr: int, size: int, category: int) -> int:
    r = len(life.size)
    life.size = np.append(life.size, size)
    life.made = np.append(life.made, -1)
    life.freed = np.append(life.freed, NEVER)
    life.ptr = np.append(life.ptr, ptr)
    life.born_ns = np.append(life.born_ns, -_BIG_TIME)
    life.died_ns = np.append(life.died_ns, _BIG_TIME)
    life.context = np.append(life.context, -1)
    life.category = np.append(life.category, category)
    life._by_ptr.setdefault(ptr, []).append(r)
    return r


def _mark(life: Lifetimes, r: int, category: int) -> None:
    life.category[r] = min(int(life.category[r]), category)


def _found_late(life: Lifetimes, ptr: int, nbytes: int, category: int, device: str) -> int:
    """A storage alive at the start that only a hook revealed (a with-block's input saved, an
    optimizer's state read after its first step here). On CUDA the start is exact: it comes out
    of the "other" part."""
    size = block_size(nbytes, device)
    if device == "cuda":
        other = np.flatnonzero((life.made < 0) & (life.ptr == -1))
        if len(other) and life.size[other[0]] >= size:
            life.size[other[0]] -= size
        else:
            life.notes.append(f"{size:,} B of {CATEGORIES[category]} not in the allocator's count")
    else:
        life.start_bytes += size
    return _add_start(life, ptr, size, category)


def _categorise(life: Lifetimes, records: StepRecords, device: str) -> None:
    late = 0
    for ptr, _nbytes, time_ns, dev in records.grads:
        if dev == device and (r := life.at(ptr, time_ns)) is not None:
            _mark(life, r, CATEGORY["gradients"])
    for ptr, nbytes in records.optimizer_after.get(device, {}).items():
        r = life.at(ptr, records.end_ns)
        if r is None:
            late += block_size(nbytes, device)
            r = _found_late(life, ptr, nbytes, CATEGORY["optimizer_state"], device)
        _mark(life, r, CATEGORY["optimizer_state"])
    seen: set[int] = set()
    credited: set[int] = set()
    for pack in records.packs:
        if pack.device != device or pack.parameter or pack.in_backward or pack.ptr in seen:
            continue
        seen.add(pack.ptr)
        r = life.at(pack.ptr, pack.time_ns)
        if r is None:
            late += block_size(pack.nbytes, device)
            r = _found_late(life, pack.ptr, pack.nbytes, CATEGORY["activations"], device)
        _mark(life, r, CATEGORY["activations"])
        if r not in credited and life.made[r] >= 0:
            credited.add(r)
            key = int(life.context[r])
            life.saved_alloc[key] = life.saved_alloc.get(key, 0) + int(life.size[r])
    if late and device != "cuda":
        life.notes.append(
            f"{late:,} B alive at the step's start were first seen during it (optimizer state, "
            "saved inputs made before the profiler started): added to the start"
        )


def peak_shares(
    life: Lifetimes, alive: Array, label: Any, limit: int = PEAK_SHARES
) -> tuple[PeakShare, ...]:
    """The live set by allocating layer and phase, largest first (`label(context id)` gives
    (phase, path); -1, alive at the start, is ("start", None)); the rest in one "(rest)" row."""
    count = len(CATEGORIES)
    key = (life.context[alive] + 1) * count + life.category[alive]
    sums = np.rint(np.bincount(key, life.size[alive])).astype(np.int64)
    groups: dict[tuple[str, str | None], list[int]] = {}
    for k in np.flatnonzero(sums).tolist():
        context, category = divmod(k, count)
        where = ("start", None) if context == 0 else label(context - 1)
        groups.setdefault(where, [0] * count)[category] += int(sums[k])
    ranked = sorted(groups.items(), key=lambda item: -sum(item[1]))
    shares = [PeakShare(phase, path, MemoryBytes(*parts)) for (phase, path), parts in ranked]
    if len(shares) <= limit:
        return tuple(shares)
    rest = [sum(getattr(s.categories, name) for s in shares[limit:]) for name in CATEGORIES]
    return (*shares[:limit], PeakShare("outside", "(rest)", MemoryBytes(*rest)))


__all__ = ["EPS_NS", "Lifetimes", "corrected", "lifetimes", "pairs", "peak_shares"]
