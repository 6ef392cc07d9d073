"""One iteration's raw events as columns, attributed to layers in array passes.

The common case, a forward on the CPU without memory (`hybridprof run`, `Profile`), needs four
fields per event: name, start, end, thread. `read_columns` reads them once, one accessor over all
events at a time, into arrays (names as small integer codes); `attribute_columns` then works out
what `attribution.attribute` works out from the same events, with numpy passes instead of a Python
step per event: on the 400-leaf MLP far less time (benchmarks/README.md, "Measured in passing"),
and the same numbers (sums are taken in integer
nanoseconds, so they do not even depend on the order of the additions). Backward, memory and device
events still go through `attribution.attribute` (`EventColumns.events()` rebuilds its input): when
the names read show a training step (a backward node, an optimizer's range) or FSDP2's ranges
(their time moves to the unit they serve, `attribution._open_served`), two more fields are
read, the autograd sequence number and the forward thread, so the walk can link backward nodes to
the layers whose forward made them.

The tree: per thread, events sorted by start (stable: a parent starts no later than its children
and the profiler records it first) nest like a stack; an event's parent is the innermost event
still open when it starts (see `_parents`). An op belongs to the innermost layer range above it; a
range's self time is its duration less the ranges nested directly in it (through ops or not); an
op's self time is its duration less its children's. An op that is the only child of an op of the
same name is merged into it, as torch's event tree does (see `attribution._absorb`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hybridprof.runtime.events.kineto import MEASURE_MARK, SKIPPED_NAMES, Event
from hybridprof.runtime.events.tp_names import SIZED, first_input_bytes
from hybridprof.runtime.events.training_names import needs_the_walk
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, PathMeasure

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class EventColumns:
    """The CPU events of one iteration (utility events and those before the measure mark left
    out), in the profiler's order: `code` indexes `names`. `seq` and `fwd_thread` (each event's
    autograd sequence number and forward thread) are read only for a training step (`training`);
    `nbytes` (a collective's input bytes, tensor parallel) only when collectives ran.
    """

    names: list[str]
    code: Array
    start: Array
    end: Array
    thread: Array
    seq: Array | None = None
    fwd_thread: Array | None = None
    nbytes: Array | None = None

    def __len__(self) -> int:
        return len(self.code)

    @property
    def training(self) -> bool:
        """A backward pass or an optimizer ran, or FSDP2's hooks (`needs_the_walk`): the events
        need the walk, with their links."""
        return self.seq is not None

    def subset(self, keep: Array) -> EventColumns:
        """The events `keep` (a mask or positions) selects, in the same order."""
        seq, fwd, nbytes = self.seq, self.fwd_thread, self.nbytes
        return EventColumns(
            self.names,
            self.code[keep],
            self.start[keep],
            self.end[keep],
            self.thread[keep],
            None if seq is None else seq[keep],
            None if fwd is None else fwd[keep],
            None if nbytes is None else nbytes[keep],
        )

    def events(self) -> list[Event]:
        """The same events as `kineto.read_events` gives (CPU only; with links for a training
        step), for the walk: per-call frames (`Profile.raw()`), backward and the optimizer."""
        names = self.names
        fields = (self.code, self.start, self.end, self.thread)
        if self.seq is None or self.fwd_thread is None:
            return [
                Event("cpu", names[c], s, e, t)
                for c, s, e, t in zip(*(f.tolist() for f in fields), strict=True)
            ]
        if self.nbytes is not None:
            return [
                Event("cpu", names[c], s, e, t, q, f, 0, 0, b)
                for c, s, e, t, q, f, b in zip(
                    *(f.tolist() for f in (*fields, self.seq, self.fwd_thread, self.nbytes)),
                    strict=True,
                )
            ]
        return [
            Event("cpu", names[c], s, e, t, q, f)
            for c, s, e, t, q, f in zip(
                *(f.tolist() for f in (*fields, self.seq, self.fwd_thread)), strict=True
            )
        ]


def read_columns(prof: Any, mark_window: tuple[int, int] | None = None) -> EventColumns:
    """Name, start, end and thread of every event of a stopped session (kineto's raw events).

    Each field is read for all events by one `map` over the pybind accessor: the per-event Python
    work is the accessor call alone. `mark_window`: the wall clock (`time.time_ns`) just before
    and after the measure mark was opened; with it, the warm step's events (half of them) are
    skipped without reading their names (see `_measured_from`)."""
    raw = prof.kineto_results.events()
    if not raw:
        nothing = np.zeros(0, dtype=np.int64)
        return EventColumns([], nothing, nothing, nothing, nothing)
    kind = type(raw[0])  # torch's KinetoEvent, wherever this torch keeps the class
    start = np.array(list(map(kind.start_ns, raw)), dtype=np.int64)
    first = _measured_from(raw, kind, start, mark_window) if mark_window else 0
    if first:
        raw, start = raw[first:], start[first:]
    names = list(map(kind.name, raw))
    end = np.array(list(map(kind.end_ns, raw)), dtype=np.int64)
    thread = np.array(list(map(kind.start_thread_id, raw)), dtype=np.int64)
    unique = list(dict.fromkeys(names))  # a few dozen op names and one per layer
    seq = fwd = None
    if any(map(needs_the_walk, unique)):
        seq = np.array(list(map(kind.sequence_nr, raw)), dtype=np.int64)
        fwd = np.array(list(map(kind.fwd_thread_id, raw)), dtype=np.int64)
    nbytes = _collective_bytes(raw, names) if not SIZED.isdisjoint(unique) else None
    del raw
    index = {name: i for i, name in enumerate(unique)}
    code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    keep = np.ones(len(code), dtype=bool)
    mark = index.get(MEASURE_MARK)
    if mark is not None:  # events before the mark belong to the unmeasured warm step
        keep &= start >= start[code == mark].max()
    skipped = [i for i, name in enumerate(unique) if name in SKIPPED_NAMES]
    if skipped:
        keep &= ~np.isin(code, skipped)
    columns = EventColumns(unique, code, start, end, thread, seq, fwd, nbytes)
    return columns if keep.all() else columns.subset(keep)


def _collective_bytes(raw: Any, names: list[str]) -> Array:
    """Each collective's (and wait's) first input bytes, 0 for every other event."""
    nbytes = np.zeros(len(names), dtype=np.int64)
    for index, name in enumerate(names):
        if name in SIZED:
            nbytes[index] = first_input_bytes(raw[index].shapes(), raw[index].dtypes())
    return nbytes


# How far from the wall clock around the mark its event's start may be and still be looked for
# there: torch converts its cheap clock to Unix time, within microseconds of `time.time_ns`.
_MARK_SLACK_NS = 2_000_000


def _measured_from(raw: list[Any], kind: Any, start: Array, window: tuple[int, int]) -> int:
    """The position of the measure mark in `raw` (0: not found, read everything).

    Found by reading the names of the few events that started within the wall-clock window
    around the mark, so the warm step's events need no names, ends or threads. Only when the
    events come sorted by start (torch 2.x does so): then every event before the mark started
    before it, and the full read would drop it too."""
    if len(start) < 2 or (np.diff(start) < 0).any():
        return 0
    low = int(np.searchsorted(start, window[0] - _MARK_SLACK_NS, side="left"))
    high = int(np.searchsorted(start, window[1] + _MARK_SLACK_NS, side="right"))
    names = list(map(kind.name, raw[low:high]))
    if MEASURE_MARK not in names:
        return 0
    found = low + len(names) - 1 - names[::-1].index(MEASURE_MARK)
    first = int(np.searchsorted(start, start[found], side="left"))  # ties with it stay in
    return first


@dataclass(frozen=True, slots=True)
class _Tree:
    """The events sorted per thread by start, each with its parent and innermost range."""

    order: Array  # sorted position -> index into the columns
    parent: Array  # sorted position of the parent, -1 at the top level
    path_id: Array  # per sorted position: its path's index if it is a layer range, else -1
    owner: Array  # sorted position of the innermost range at or above it, -1 for none
    duration: Array
    code: Array


def _tree(columns: EventColumns, range_paths: Array) -> _Tree:
    order = np.lexsort((columns.start, columns.thread))  # stable: per thread, by start
    start, end = columns.start[order], columns.end[order]
    code = columns.code[order]
    thread = columns.thread[order]
    parent = np.full(len(order), -1, dtype=np.int64)
    cuts = np.flatnonzero(np.diff(thread)) + 1
    bounds = [0, *cuts.tolist(), len(order)]
    for first, last in itertools.pairwise(bounds):  # each thread is its own tree
        found = _parents(start[first:last], end[first:last])
        parent[first:last] = np.where(found >= 0, found + first, -1)
    path_id = range_paths[code]
    return _Tree(order, parent, path_id, _owners(parent, path_id >= 0), end - start, code)


def _parents(start: Array, end: Array) -> Array:
    """Each event's parent in the stack walk of one thread's events sorted by start: the latest
    earlier event still open when it starts (-1: none).

    Vectorised: an event's depth is the number of earlier events not yet ended when it starts,
    and its parent the latest earlier event one level up. That is the stack walk's answer when
    the events nest (each inside its parent); when some do not (overlapping ends, zero-length
    events), the stack walk itself runs."""
    n = len(start)
    position = np.arange(n, dtype=np.int64)
    if n == 0 or not (end > start).all():
        return _parents_by_stack(start, end)
    depth = position - np.searchsorted(np.sort(end), start, side="right")
    key = depth * n + position  # by level, then by position
    by_key = np.argsort(key, kind="stable")
    found = np.searchsorted(key[by_key], key - n) - 1  # the latest key one level up
    parent = np.where(depth > 0, by_key[np.maximum(found, 0)], -1)
    child = np.flatnonzero(depth > 0)
    up = parent[child]
    nested = (
        (depth[up] == depth[child] - 1).all()
        and (end[up] > start[child]).all()
        and (end[child] <= end[up]).all()
    )
    return parent if nested else _parents_by_stack(start, end)


def _parents_by_stack(start: Array, end: Array) -> Array:
    """The stack walk itself: close what ended before an event starts; its parent is the top."""
    parent = [-1] * len(start)
    ends: list[int] = []
    open_at: list[int] = []
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        while ends and s >= ends[-1]:
            ends.pop()
            open_at.pop()
        if open_at:
            parent[i] = open_at[-1]
        ends.append(e)
        open_at.append(i)
    return np.array(parent, dtype=np.int64)


def _owners(parent: Array, is_range: Array) -> Array:
    """Per event, the innermost layer range at or above it (-1: none), by pointer jumping: each
    round looks twice as far up the tree."""
    n = len(parent)
    owner = np.where(is_range, np.arange(n, dtype=np.int64), -2)  # -2: not known yet
    up = parent.copy()
    todo = np.flatnonzero(owner == -2)
    while len(todo):
        above = up[todo]
        top = above < 0
        owner[todo[top]] = -1
        todo, above = todo[~top], above[~top]
        known = owner[above]
        done = known != -2
        owner[todo[done]] = known[done]
        todo, above = todo[~done], above[~done]
        up[todo] = up[above]  # `above` is no range: skip it
    return owner


def attribute_columns(columns: EventColumns, names: Mapping[str, str]) -> IterationMeasure:
    """What `attribution.attribute(columns.events(), names)` gives: per path its calls, self and
    total CPU time and its ops; the time in no layer; the iteration's profiled time."""
    paths, range_paths = _range_paths(columns.names, names)
    tree = _tree(columns, range_paths)
    parent, duration, code = tree.parent, tree.duration, tree.code
    n = len(parent)
    has_parent = parent >= 0
    up = np.maximum(parent, 0)
    children = np.bincount(parent[has_parent], minlength=n)
    child_ns = _sums(parent[has_parent], duration[has_parent], n)
    is_op = tree.path_id < 0
    merged = has_parent & is_op & is_op[up] & (code == code[up]) & (children[up] == 1)
    for c in np.flatnonzero(merged)[::-1].tolist():  # deepest first: chains merge bottom up
        child_ns[parent[c]] += child_ns[c] - duration[c]
    self_ns = duration - child_ns
    measure = IterationMeasure()
    _fold_ranges(measure, tree, paths)
    counted = is_op & ~merged
    inside = counted & (tree.owner >= 0)
    _fold_ops(measure, tree, paths, columns.names, np.flatnonzero(inside), self_ns)
    outside = counted & (tree.owner < 0)
    measure.outside_cpu_us = int(self_ns[outside].sum()) / 1000
    _fold_outside_ops(measure, tree, columns.names, np.flatnonzero(outside), self_ns)
    measure.total_cpu_us = int(duration[~has_parent].sum()) / 1000
    return measure


def attribute_layer_columns(columns: EventColumns, names: Mapping[str, str]) -> IterationMeasure:
    """Per path its calls, self and total CPU time from the layer ranges alone (walked as a tree
    of their own): where the events nest, the numbers of `attribute_columns`, without ops, and
    `total_cpu_us` stays 0 (it needs every event)."""
    paths, range_paths = _range_paths(columns.names, names)
    ranges = np.flatnonzero(range_paths[columns.code] >= 0)
    subset = EventColumns(
        columns.names,
        columns.code[ranges],
        columns.start[ranges],
        columns.end[ranges],
        columns.thread[ranges],
    )
    measure = IterationMeasure()
    _fold_ranges(measure, _tree(subset, range_paths), paths)
    return measure


def _range_paths(unique: list[str], names: Mapping[str, str]) -> tuple[list[str], Array]:
    """The paths whose ranges occur, and per name code the index of its path (-1: an op)."""
    paths: list[str] = []
    index = np.full(len(unique), -1, dtype=np.int64)
    for i, name in enumerate(unique):
        path = names.get(name)
        if path is not None:
            index[i] = len(paths)
            paths.append(path)
    return paths, index


def _sums(index: Array, values: Array, size: int) -> Array:
    """Integer sums of `values` per `index` (exact: float64 holds these sums of ns exactly)."""
    return np.bincount(index, weights=values, minlength=size).astype(np.int64)


def _fold_ranges(measure: IterationMeasure, tree: _Tree, paths: list[str]) -> None:
    """Each range: a call of its path; total its duration, self that less the ranges nested
    directly in it."""
    ranges = np.flatnonzero(tree.path_id >= 0)
    duration = tree.duration
    parent = tree.parent[ranges]
    enclosing = np.where(parent >= 0, tree.owner[np.maximum(parent, 0)], -1)
    nested = _sums(enclosing[enclosing >= 0], duration[ranges][enclosing >= 0], len(duration))
    path_id = tree.path_id[ranges]
    count = len(paths)
    calls = np.bincount(path_id, minlength=count).tolist()
    outer = ~_inside_same_path(tree, ranges)  # a recursive call's time is in its caller's total
    total = _microseconds(_sums(path_id[outer], duration[ranges][outer], count))
    own = _microseconds(_sums(path_id, (duration - nested)[ranges], count))
    found = measure.paths
    for path, n, s, t in zip(paths, calls, own, total, strict=True):
        if n:
            found[path] = PathMeasure(path, n, s, t)


def _inside_same_path(tree: _Tree, ranges: Array) -> Array:
    """Per range (sorted positions), whether an enclosing range has the same path: a forward that
    calls itself, whose nested calls count as calls but must not add their time to the path's
    total a second time (50 deep, the total read 25x the real one).

    Walks up the enclosing ranges of every range whose path has more than one call, one level a
    step for all of them at once; most paths have one call, and then nothing is walked."""
    inside = np.zeros(len(ranges), dtype=bool)
    path_id = tree.path_id[ranges]
    repeated = np.bincount(path_id)[path_id] > 1
    if not repeated.any():
        return inside
    parent = tree.parent
    enclosing = np.where(parent >= 0, tree.owner[np.maximum(parent, 0)], -1)
    todo = np.flatnonzero(repeated)  # indexes into `ranges`
    above = enclosing[ranges[todo]]
    while len(todo):
        alive = above >= 0
        todo, above = todo[alive], above[alive]
        same = tree.path_id[above] == path_id[todo]
        inside[todo[same]] = True
        todo, above = todo[~same], enclosing[above[~same]]
    return inside


def _microseconds(ns: Array) -> list[float]:
    """Integer nanoseconds as microseconds (the same floats as `int / 1000` in Python)."""
    return (ns / 1000).tolist()  # type: ignore[no-any-return]


def _fold_ops(
    measure: IterationMeasure,
    tree: _Tree,
    paths: list[str],
    names: list[str],
    ops: Array,
    self_ns: Array,
) -> None:
    """Each op under its innermost range's path, by (path, name): calls, total and self time."""
    key = tree.path_id[tree.owner[ops]] * len(names) + tree.code[ops]
    keys, which = np.unique(key, return_inverse=True)
    calls = np.bincount(which, minlength=len(keys)).tolist()
    total = _microseconds(_sums(which, tree.duration[ops], len(keys)))
    own = _microseconds(_sums(which, self_ns[ops], len(keys)))
    path_index, name_code = divmod(keys, len(names))
    # Every op's innermost range made its path's measure (`_fold_ranges` ran first).
    ops_of = [measure.paths[path].ops if path in measure.paths else {} for path in paths]
    rows = zip(path_index.tolist(), name_code.tolist(), calls, own, total, strict=True)
    for p, c, n, s, t in rows:  # one OpMeasure per (path, op): tens of thousands at 10,000 layers
        name = names[c]
        ops_of[p][name] = OpMeasure(name, n, s, t)


def _fold_outside_ops(
    measure: IterationMeasure, tree: _Tree, names: list[str], ops: Array, self_ns: Array
) -> None:
    """Each op in no layer by name, into the outside row's ops (a few distinct names)."""
    keys, which = np.unique(tree.code[ops], return_inverse=True)
    calls = np.bincount(which, minlength=len(keys)).tolist()
    total = _microseconds(_sums(which, tree.duration[ops], len(keys)))
    own = _microseconds(_sums(which, self_ns[ops], len(keys)))
    found = measure.outside_ops
    for c, n, s, t in zip(keys.tolist(), calls, own, total, strict=True):
        found[names[c]] = OpMeasure(names[c], n, s, t)


__all__ = ["EventColumns", "attribute_columns", "attribute_layer_columns", "read_columns"]
