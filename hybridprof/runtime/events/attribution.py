"""Attributing one iteration's raw profiler events to layer ranges, forward and backward.

Each selected layer call is a profiler range named by its path (see `range_name`). Per thread the
events form a tree by time containment; every op belongs to the innermost layer range enclosing it.
A layer's self time is its range's duration minus the durations of the layer ranges nested directly
in it, so a parent never counts a selected child twice.

Backward: autograd runs each node inside an `autograd::engine::evaluate_function: <Node>` event
that carries the node's sequence number and the forward thread. The forward op that created the node
carries the same number (the last op, in time, to see it: the number is bumped when a node is made),
so (forward thread, sequence number) -> the layer ranges that enclosed that op. AccumulateGrad nodes
have no sequence number; the engine runs them as soon as their gradient is ready (they have the top
priority), i.e. right after the node that produced it, so they go to that node's layer.

Recomputation (activation checkpointing, `torch.utils.checkpoint`): backward re-runs a checkpointed
segment's forward, so its layer ranges open again, inside the event of the backward node that first
needed a dropped tensor (usually the segment's last layer's). Such a recompute range is no forward
call; its time, ops included, is BACKWARD time of its own layer (the price checkpointing pays in
backward), taken out of the node's layer. The signal: nesting in an `evaluate_function` event, which
only code the autograd engine ran can show, on whatever thread; the walk keys backward on that event
already, so no clocks of different threads are compared. An outermost recompute range's total also
counts toward the layers enclosing its layer's forward call. The op that ran the recompute (the
node's own op) has in its self time the checkpoint's bookkeeping (RNG state, saved-tensor hooks, the
exception that stops recomputing early: a cost per segment, larger under the profiler);
that goes to the layer that called the checkpoint, which owns its forward bookkeeping too, if
selected (else to no layer).

Reentrant checkpointing (`use_reentrant=True`) runs its segment's backward inside the node of the
checkpoint: `torch.autograd.backward` is called in that node, so the segment's nodes are events
nested in it. Each such nested node carries its own sequence number, which the recomputed forward
op that made it carries too, so it goes to that op's layer (the enclosing node's layer when its
number is not found), and its time is taken out of the enclosing node's.

A training step (a with-block around the user's loop) has ranges that are no layer: the
optimizer's, a closure's, param-group markers, the with-block's step ranges; `optimizer_fold.py`
says what each does. An event inside an optimizer part is the optimizer's, whatever encloses it.

Device kernels name their launching CPU op by correlation id; their time goes to that op's layer.

Time in no layer: every op outside all layer ranges and the optimizer, and every backward node
whose forward ran outside them (the loss's), adds its self time to `outside_cpu_us`, so the
layers' self times (forward and backward), the optimizer's and that add up to the iteration's
profiled time. Each such event is also an op of `outside_ops`, folded as a layer's ops are (a
backward one kept apart by its key), so the outside row says what its time is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter

from hybridprof.runtime.events import optimizer_fold, tp_comm
from hybridprof.runtime.events.frames import (
    BWD,
    BWD_ROOT,
    CHAIN,
    CHILD_DMEM,
    CHILD_MEM,
    CHILD_NS,
    DMEM,
    EVENT,
    HOOKED,
    HOOKS,
    HOST,
    KIND,
    LAYER,
    MEASURE,
    MEM,
    MERGED,
    NESTED_DMEM,
    NESTED_MEM,
    NESTED_NS,
    OP,
    OPT,
    RANGE,
    RAW,
    RECOMPUTE,
    SERVED,
    SOLE,
    Frame,
)
from hybridprof.runtime.events.fsdp_names import settle_exposed
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.links import (
    backward_root,
    fold_backward,
    fold_device,
    fold_host,
    fold_recompute,
    fold_served,
)
from hybridprof.runtime.events.training_names import BACKWARD_PREFIX as BACKWARD_PREFIX
from hybridprof.runtime.events.training_names import CommEntry, NameEntry, RangeNames
from hybridprof.runtime.events.walk import Walk, add_outside, fold_op
from hybridprof.runtime.measures.iteration import IterationMeasure, PathMeasure, op_key

ROOT_RANGE = "(root)"
# The BWD key of backward work run in no backward node (FSDP2's post-backward callback): no
# forward op has it, so nothing is found for it but the range's own unit.
NO_NODE = (-1, -1)


def range_name(path: str) -> str:
    """The profiler range name of a layer: its path; the root ("") gets a visible name."""
    return path or ROOT_RANGE


@dataclass(frozen=True, slots=True)
class Attribution:
    """What one iteration's events say: the measure, and (when kept) every layer call's frame.

    raw_calls: per path, the closed frame of each call (in the order the calls ended), whose RAW
    slot lists the op frames that ran directly in it; `runtime.event_lists` turns them into
    torch EventLists only when `Profile.raw()` asks (building one object per op costs more than
    the walk itself, and most callers never look). kernels: per launching op frame (by id), the
    device kernels it launched, as (name, device index, duration us); kept with raw_calls.
    """

    measure: IterationMeasure
    raw_calls: dict[str, list[Frame]]
    kernels: dict[int, list[tuple[str, int, float]]]


def attribute(
    events: Iterable[Event],
    names: Mapping[str, str],
    *,
    backward: bool = False,
    keep_raw: bool = False,
) -> Attribution:
    """Fold one iteration's events into per-path measures.

    names: range name -> path (see `range_name`). backward: attribute autograd nodes to layers.
    """
    threads: dict[int, list[Event]] = defaultdict(list)
    device: list[Event] = []
    for event in events:
        (device if event.kind == "device" else threads[event.thread]).append(event)
    walk = _new_walk(names, backward, keep_raw)
    top_level_ns = 0
    for thread_events in threads.values():
        if not tp_comm.backend_thread(thread_events):
            top_level_ns += _walk_thread(thread_events, walk)
            if walk.fsdp_notes:  # the thread's events are in start order now
                settle_exposed(walk.fsdp_notes, thread_events, walk.measure)
                walk.fsdp_notes.clear()
    walk.measure.total_cpu_us = top_level_ns / 1000
    _fold_deferred(walk)
    fold_device(device, walk)
    if walk.tp_notes:
        tp_comm.settle(walk)
    optimizer_fold.finish(walk.measure)
    walk.measure.outside_cpu_us = walk.outside_ns / 1000
    return Attribution(walk.measure, dict(walk.raw), walk.kernels)


def _new_walk(names: Mapping[str, str], backward: bool, keep_raw: bool) -> Walk:
    """An empty walk over one iteration's events for the ranges `names`."""
    return Walk(
        names,
        backward,
        keep_raw,
        IterationMeasure(),
        [],
        {},
        {},
        {},
        defaultdict(list),
        {},
        RangeNames(names),
        {},
        frozenset(names.values()),
    )


def _fold_deferred(walk: Walk) -> None:
    """Fold the frames the walk put aside until every thread was walked: recomputed forwards,
    served and hosted ranges, and backward nodes (their layer is known only then)."""
    for frame in walk.deferred:
        if frame[KIND] == RECOMPUTE:
            fold_recompute(frame, walk)
        elif frame[KIND] == SERVED:
            fold_served(frame, walk)
        elif frame[KIND] == HOST:
            fold_host(frame, walk)
        elif frame[KIND] != MERGED:
            fold_backward(frame, walk)


def _walk_thread(events: list[Event], walk: Walk) -> int:
    """Walk one thread's events in tree order; returns the time covered by its top-level events.

    This loop runs once per event (thousands per forward), so the common case, an op, is inlined
    here instead of going through small helpers: each Python call would cost a visible share of
    the budget (figures: benchmarks/README.md, "Measured in passing").
    """
    # A stable sort on start time: events starting in the same nanosecond keep the profiler's
    # order, which records a parent before the children it calls.
    events.sort(key=_START)
    stack: list[Frame] = []
    # The key of the last node the engine ran at the top level, and of the last node nested in
    # one (an AccumulateGrad, which has no number of its own, goes to the node before it).
    last_bwd: list[tuple[int, int] | None] = [None, None]
    top_level_ns = 0
    lookup, backward, keep_raw, pop = walk.lookup, walk.backward, walk.keep_raw, stack.pop
    for event in events:
        start = event[_START_I]
        while stack and start >= stack[-1][EVENT][_END_I]:
            top_level_ns += _close(pop(), stack, walk)
        if event[0] == "mem":
            if stack:
                stack[-1][DMEM if event.on_device else MEM] += event.nbytes
            continue
        if stack:
            parent = stack[-1]
            frame = [
                event, parent[CHAIN], parent[BWD], parent[RANGE], OP, 0, 0, 0, 0, 0, 0, 0, 0,
                None, None, parent, None, parent[OPT],
            ]  # fmt: skip
        else:
            frame = [
                event, (), None, None, OP, 0, 0, 0, 0, 0, 0, 0, 0, None, None, None, None, None
            ]  # fmt: skip
        entry = lookup[event[1]]  # one lookup: the common case, an op, is None
        if entry is None:
            if backward and frame[CHAIN] and event.seq >= 0:
                # Later ops overwrite earlier ones: the last op to see a number made its node.
                walk.seq_chains[(event.thread, event.seq)] = frame[CHAIN]
        else:
            _open_named(event, frame, entry, walk, last_bwd)
        if keep_raw and frame[KIND] == OP and frame[BWD] is None and frame[RANGE] is not None:
            frame[RANGE][RAW].append(frame)  # a forward op of a layer, in start order
        if event.correlation_id:
            walk.by_correlation[event.correlation_id] = frame
        stack.append(frame)
    while stack:
        top_level_ns += _close(pop(), stack, walk)
    return top_level_ns


_START_I, _END_I = Event._fields.index("start_ns"), Event._fields.index("end_ns")
_START = itemgetter(_START_I)


def _open_named(
    event: Event,
    frame: Frame,
    entry: NameEntry,
    walk: Walk,
    last_bwd: list[tuple[int, int] | None],
) -> None:
    """Open what a named event begins: a layer's range, a backward node, an optimizer's part, an
    FSDP2 unit's communication, a tensor-parallel layer's hooks range or collective."""
    if isinstance(entry, str):
        frame[OPT] = None  # a layer's forward is the layer's, wherever it runs
        _open_layer(frame, entry, walk, LAYER if frame[BWD] is None else RECOMPUTE)
    elif entry is None:
        return
    elif entry[0] == "tp":
        walk.tp_notes.append((frame, entry[1]))
    elif entry[0] == "hooks":
        if frame[BWD] is None:  # a recomputed call (in backward) is its layer range's alone
            frame[OPT] = None
            _open_layer(frame, entry[1], walk, HOOKS)
    elif entry[0] == "node":
        if walk.backward:
            _open_node(event, frame, walk, last_bwd)
    elif entry[0] == "comm":
        _note_comm(event, frame, entry, walk)
        _open_served(frame, entry[2], walk, backward=entry[1] == "reduce_scatter")
    elif entry[0] == "fsdp":
        _open_served(frame, entry[1], walk, backward=entry[2])
    else:
        optimizer_fold.open_special(frame, entry[0], walk.measure)


def _note_comm(event: Event, frame: Frame, entry: CommEntry, walk: Walk) -> None:
    """An FSDP2 communication range's wall time, to the unit it names (a column of its row; the
    time itself moves there in `_open_served`). A gather that autograd runs is backward's
    re-gather."""
    _, kind, path = entry
    if kind == "all_gather" and frame[BWD] is not None:
        kind = "regather"
    walk.measure.add_comm(path, kind, (event.end_ns - event.start_ns) / 1000)
    walk.fsdp_notes.append((event, kind, path))


def _open_served(frame: Frame, path: str, walk: Walk, *, backward: bool) -> None:
    """An FSDP2 range working for unit `path` (its hooks, a gather, a prefetch for it, its
    reduce-scatter) is the unit's time, wherever it runs: FSDP2 runs them in module hooks,
    outside the unit's forward, in the enclosing layer's time, a backward node's or none. So it
    opens a range of the unit, as the unit's own range would: in the forward a HOOKS range (its
    time the unit's self time, none of its calls); in a backward node, or for backward work (the
    root's post-backward callback runs in no node), a SERVED one (the unit's backward time, out
    of the node's layer, or of the outside time). The events in it are the unit's ops. A unit
    that is no selected layer keeps none of it (its ranges stay where they ran); a range inside
    one already the unit's (a gather in its pre-forward) opens nothing more."""
    enclosing = frame[RANGE]
    if path not in walk.layers or frame[OPT] is not None:
        return  # no row to take it, or the optimizer's (FSDP2 hooks run in no optimizer step)
    if enclosing is not None and enclosing[MEASURE].path == path:
        return
    if frame[BWD] is None and not backward:
        _open_layer(frame, path, walk, HOOKS)
        return
    if frame[BWD] is None:  # backward work in no node: what runs in it is backward's too
        frame[BWD] = NO_NODE
    _open_layer(frame, path, walk, SERVED)


def _open_layer(frame: Frame, path: str, walk: Walk, kind: int = LAYER) -> None:
    enclosing = frame[RANGE]
    hooks = enclosing is not None and enclosing[KIND] == HOOKS
    if kind == LAYER and hooks and enclosing[MEASURE].path == path:
        kind = HOOKED  # its forward inside its hooks' range: one call
    if kind != HOOKED:
        frame[CHAIN] = (*frame[CHAIN], path)
    frame[RANGE], frame[KIND], frame[RAW] = frame, kind, []
    frame[MEASURE] = walk.measure.path(path)


def _open_node(
    event: Event, frame: Frame, walk: Walk, last_bwd: list[tuple[int, int] | None]
) -> None:
    """A backward node's key (forward thread, sequence number); one run inside a layer's forward
    (`torch.autograd.grad` in it) is that layer's op. `last_bwd`: the last top-level and nested
    node keys, updated here."""
    if not frame[CHAIN]:
        enclosing = frame[BWD]
        own = (event.fwd_thread, event.seq) if event.seq >= 0 else None
        frame[KIND], frame[OPT] = BWD_ROOT, None
        walk.measure.backward = True
        if enclosing is None:  # a node the engine runs
            frame[BWD] = last_bwd[0] = own or last_bwd[0]
            last_bwd[1] = None
        else:  # nested in a node: reentrant checkpointing's backward of its segment
            frame[BWD] = last_bwd[1] = own or last_bwd[1] or enclosing
            walk.fallbacks[id(frame)] = enclosing
    elif event.seq >= 0:
        walk.seq_chains[(event.thread, event.seq)] = frame[CHAIN]


def _close(frame: Frame, stack: list[Frame], walk: Walk) -> int:
    """Pass a popped frame's totals to its parent and fold it; returns its duration if top-level."""
    event, kind = frame[EVENT], frame[KIND]
    sole = frame[SOLE]
    frame[SOLE] = None  # read once: no parent-child link left both ways (the frames stay acyclic)
    if sole and kind == OP and sole[KIND] == OP and sole[EVENT][1] == event[1]:
        _absorb(frame, sole, walk)
    duration = event.end_ns - event.start_ns
    total_mem, total_dmem = frame[MEM] + frame[CHILD_MEM], frame[DMEM] + frame[CHILD_DMEM]
    if stack:
        parent = stack[-1]
        parent[SOLE] = frame if parent[SOLE] is None else False
        parent[CHILD_NS] += duration
        if total_mem or total_dmem:
            parent[CHILD_MEM] += total_mem
            parent[CHILD_DMEM] += total_dmem
        if kind != OP:
            _nest_in_parent(frame, duration, total_mem, total_dmem, stack)
    if frame[OPT] is not None and kind == OP:  # the optimizer's, even inside a backward node
        optimizer_fold.fold_optimizer(frame, walk.measure)
        if frame[BWD] is not None and stack and stack[-1][OPT] is None:  # out of the node's time
            backward_root(stack)[NESTED_NS] += duration
    elif kind in (LAYER, HOOKS, HOOKED):
        _fold_range(frame, duration, total_mem, total_dmem, walk)
        if not walk.keep_raw:
            # A range's frame named itself its RANGE while open; unlinked now, the frames form
            # no cycle and are freed when the walk ends, never by a later GC pause in a layer.
            # (Kept frames, for Profile.raw(), stay a tree with links both ways: see Profile.)
            frame[RANGE] = None
    elif frame[BWD] is not None:
        if kind == OP and frame[RANGE] is not None:  # an op of a recomputed forward
            fold_op(
                frame, frame[RANGE][MEASURE].ops, op_key(event.name, backward=True), backward=True
            )
        else:
            if kind in (RECOMPUTE, SERVED) and not walk.keep_raw:
                frame[RANGE] = None  # as for LAYER: no cycle
            walk.deferred.append(frame)
    elif frame[CHAIN]:
        fold_op(frame, frame[RANGE][MEASURE].ops, event.name, backward=False)
    else:
        add_outside(frame, walk)
    return 0 if stack else duration


def _fold_range(frame: Frame, duration: int, total_mem: int, total_dmem: int, walk: Walk) -> None:
    measure: PathMeasure = frame[MEASURE]
    kind = frame[KIND]
    measure.calls += kind != HOOKS  # a HOOKS range and its HOOKED one are one call
    # a recursive call is in its caller's total, a HOOKED one in its HOOKS range's
    if kind != HOOKED and frame[CHAIN].count(measure.path) == 1:
        measure.total_cpu_us += duration / 1000
        measure.cpu_mem += total_mem
        measure.device_mem += total_dmem
    measure.self_cpu_us += (duration - frame[NESTED_NS]) / 1000
    measure.self_cpu_mem += total_mem - frame[NESTED_MEM]
    measure.self_device_mem += total_dmem - frame[NESTED_DMEM]
    if kind == HOOKS:
        return
    if walk.keep_raw:
        walk.raw[measure.path].append(frame)
    walk.forward_chains.setdefault(measure.path, frame[CHAIN])


def _absorb(frame: Frame, child: Frame, walk: Walk) -> None:
    """Merge `child`, the only child of an op of the same name, into it, as torch's event tree
    does: the pair is one call; the parent's self time and memory take the child's. A child
    already folded (forward) is taken back out of its op row; a deferred one is skipped later."""
    child_ns = child[EVENT].end_ns - child[EVENT].start_ns
    frame[CHILD_NS] += child[CHILD_NS] - child_ns
    frame[MEM] += child[MEM]
    frame[CHILD_MEM] -= child[MEM]
    frame[DMEM] += child[DMEM]
    frame[CHILD_DMEM] -= child[DMEM]
    child[KIND] = MERGED
    if child[OPT] is not None:  # folded into the optimizer: taken back, `frame` holds it now
        optimizer_fold.unfold_optimizer(child, walk.measure)
        return
    if child[RANGE] is None:
        if child[BWD] is not None:
            return  # a deferred backward op (skipped as MERGED)
        # outside every layer: its self time moves into `frame`'s, its op row too
        walk.outside_ns -= child_ns - child[CHILD_NS]
        ops = walk.measure.outside_ops
    else:
        ops = child[RANGE][MEASURE].ops
    name = op_key(child[EVENT].name, backward=child[BWD] is not None)
    op = ops[name]
    op.calls -= 1
    op.total_cpu_us -= child_ns / 1000
    op.self_cpu_us -= (child_ns - child[CHILD_NS]) / 1000
    op.self_cpu_mem -= child[MEM]
    op.cpu_mem -= child[MEM] + child[CHILD_MEM]
    op.self_device_mem -= child[DMEM]
    op.device_mem -= child[DMEM] + child[CHILD_DMEM]


def _nest_in_parent(
    frame: Frame, duration: int, total_mem: int, total_dmem: int, stack: list[Frame]
) -> None:
    """Take a closing layer/recompute range's time (or a HOST's self time) out of its encloser's."""
    kind, enclosing = frame[KIND], stack[-1][RANGE]
    if kind == BWD_ROOT:
        if stack[-1][BWD] is not None:  # nested: its time is its own layer's, not the encloser's
            backward_root(stack)[NESTED_NS] += duration
    elif kind == HOST:
        backward_root(stack)[NESTED_NS] += duration - frame[CHILD_NS]
    elif kind == RECOMPUTE and enclosing is None:  # outermost: out of the node's layer's time
        backward_root(stack)[NESTED_NS] += duration
        host = stack[-1]
        if host[KIND] == OP:
            host[KIND], host[MEASURE] = HOST, frame[MEASURE]
    elif kind == SERVED and enclosing is None:  # out of the node's layer's time, if in one
        node = next((f for f in reversed(stack) if f[KIND] == BWD_ROOT), None)
        if node is not None:
            node[NESTED_NS] += duration
    elif kind in (LAYER, RECOMPUTE, HOOKS, HOOKED, SERVED) and enclosing is not None:
        enclosing[NESTED_NS] += duration
        enclosing[NESTED_MEM] += total_mem
        enclosing[NESTED_DMEM] += total_dmem
