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

Device kernels name their launching CPU op by correlation id; their time goes to that op's layer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hybridprof.runtime.kineto import Event
from hybridprof.runtime.measure import IterationMeasure, OpMeasure, PathMeasure

BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
BACKWARD_SUFFIX = " [bwd]"
ROOT_RANGE = "(root)"


def range_name(path: str) -> str:
    """The profiler range name of a layer: its path; the root ("") gets a visible name."""
    return path or ROOT_RANGE


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One op seen inside one call of a layer (Profile.raw()); times in us from the trace start."""

    name: str
    start_us: float
    end_us: float
    self_us: float


@dataclass(frozen=True, slots=True)
class Attribution:
    """What one iteration's events say: the measure, and per path the raw events of each call."""

    measure: IterationMeasure
    raw: dict[str, list[tuple[RawEvent, ...]]]


class _Frame:
    """An open or closed CPU event while walking one thread's tree (mutable, built per event)."""

    __slots__ = (
        "bwd",
        "chain",
        "child_dmem",
        "child_mem",
        "child_ns",
        "dmem",
        "event",
        "is_bwd_root",
        "is_range",
        "mem",
        "nested_dmem",
        "nested_mem",
        "nested_ns",
        "range",
        "raw",
    )

    def __init__(self, event: Event) -> None:
        self.event = event
        self.chain: tuple[str, ...] = ()  # enclosing layer paths, innermost last (forward)
        self.bwd: tuple[int, int] | None = None  # (forward thread, seq) of the backward node
        self.range: _Frame | None = None  # innermost enclosing layer range (itself for a range)
        self.is_range = False
        self.is_bwd_root = False
        self.child_ns = self.mem = self.child_mem = self.dmem = self.child_dmem = 0
        self.nested_ns = self.nested_mem = self.nested_dmem = 0  # of directly nested ranges
        self.raw: list[RawEvent] = []


@dataclass(slots=True)
class _Walk:
    """State shared by the walks of all threads of one iteration."""

    names: Mapping[str, str]
    backward: bool
    closed: list[_Frame]
    seq_chains: dict[tuple[int, int], tuple[str, ...]]
    by_correlation: dict[int, _Frame]
    top_level_ns: int = 0


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
    walk = _Walk(names, backward, [], {}, {})
    for thread_events in threads.values():
        thread_events.sort(key=_tree_order)
        _walk_thread(thread_events, walk)
    measure = IterationMeasure(total_cpu_us=walk.top_level_ns / 1000)
    raw = _fold_frames(walk, measure, keep_raw)
    _fold_device(device, walk, measure)
    return Attribution(measure, raw)


def _tree_order(event: Event) -> tuple[int, int]:
    # Parents before children: earlier start first, and on equal starts the longer event first.
    return (event.start_ns, -event.end_ns)


def _walk_thread(events: list[Event], walk: _Walk) -> None:
    stack: list[_Frame] = []
    last_bwd: tuple[int, int] | None = None
    for event in events:
        while stack and event.start_ns >= stack[-1].event.end_ns:
            _close(stack, walk)
        if event.kind == "mem":
            if stack:
                _add_memory(stack[-1], event)
            continue
        frame = _open(event, stack[-1] if stack else None, walk, last_bwd)
        if frame.is_bwd_root:
            last_bwd = frame.bwd
        stack.append(frame)
    while stack:
        _close(stack, walk)


def _open(
    event: Event, parent: _Frame | None, walk: _Walk, last_bwd: tuple[int, int] | None
) -> _Frame:
    frame = _Frame(event)
    if parent is not None:
        frame.chain, frame.bwd, frame.range = parent.chain, parent.bwd, parent.range
    path = walk.names.get(event.name)
    if path is not None and frame.bwd is None:
        frame.chain = (*frame.chain, path)
        frame.range = frame
        frame.is_range = True
    elif (
        walk.backward
        and not frame.chain
        and frame.bwd is None
        and event.name.startswith(BACKWARD_PREFIX)
    ):
        frame.is_bwd_root = True
        frame.bwd = (event.fwd_thread, event.seq) if event.seq >= 0 else last_bwd
    elif walk.backward and frame.chain and event.seq >= 0:
        # Later ops overwrite earlier ones: the last op to see a sequence number made its node.
        walk.seq_chains[(event.thread, event.seq)] = frame.chain
    if event.correlation_id:
        walk.by_correlation[event.correlation_id] = frame
    return frame


def _add_memory(frame: _Frame, event: Event) -> None:
    if event.on_device:
        frame.dmem += event.nbytes
    else:
        frame.mem += event.nbytes


def _close(stack: list[_Frame], walk: _Walk) -> None:
    frame = stack.pop()
    event = frame.event
    duration = event.end_ns - event.start_ns
    total_mem, total_dmem = frame.mem + frame.child_mem, frame.dmem + frame.child_dmem
    if stack:
        parent = stack[-1]
        parent.child_ns += duration
        parent.child_mem += total_mem
        parent.child_dmem += total_dmem
        enclosing = parent.range
        if frame.is_range and enclosing is not None:
            enclosing.nested_ns += duration
            enclosing.nested_mem += total_mem
            enclosing.nested_dmem += total_dmem
    else:
        walk.top_level_ns += duration
    walk.closed.append(frame)


def _fold_frames(
    walk: _Walk, measure: IterationMeasure, keep_raw: bool
) -> dict[str, list[tuple[RawEvent, ...]]]:
    raw: dict[str, list[tuple[RawEvent, ...]]] = defaultdict(list)
    for frame in walk.closed:  # post-order: a range's ops close before the range does
        if frame.is_range:
            _fold_range(frame, measure.path(frame.chain[-1]))
            if keep_raw:
                raw[frame.chain[-1]].append(tuple(sorted(frame.raw, key=lambda r: r.start_us)))
        elif frame.bwd is not None:
            _fold_backward(frame, walk, measure)
        elif frame.chain:
            _fold_op(frame, measure.path(frame.chain[-1]).ops, frame.event.name, backward=False)
            if keep_raw and frame.range is not None:
                frame.range.raw.append(_raw_event(frame))
    return dict(raw)


def _fold_range(frame: _Frame, measure: PathMeasure) -> None:
    duration = frame.event.end_ns - frame.event.start_ns
    total_mem, total_dmem = frame.mem + frame.child_mem, frame.dmem + frame.child_dmem
    measure.calls += 1
    measure.total_cpu_us += duration / 1000
    measure.self_cpu_us += (duration - frame.nested_ns) / 1000
    measure.cpu_mem += total_mem
    measure.self_cpu_mem += total_mem - frame.nested_mem
    measure.device_mem += total_dmem
    measure.self_device_mem += total_dmem - frame.nested_dmem


def _fold_op(frame: _Frame, ops: dict[str, OpMeasure], name: str, *, backward: bool) -> OpMeasure:
    op = ops.get(name)
    if op is None:
        op = ops[name] = OpMeasure(frame.event.name, backward=backward)
    duration = frame.event.end_ns - frame.event.start_ns
    op.calls += 1
    op.total_cpu_us += duration / 1000
    op.self_cpu_us += (duration - frame.child_ns) / 1000
    op.self_cpu_mem += frame.mem
    op.cpu_mem += frame.mem + frame.child_mem
    op.self_device_mem += frame.dmem
    op.device_mem += frame.dmem + frame.child_dmem
    return op


def _fold_backward(frame: _Frame, walk: _Walk, measure: IterationMeasure) -> None:
    chain = walk.seq_chains.get(frame.bwd) if frame.bwd is not None else None
    if not chain:
        return  # a node whose forward ran outside every selected layer (e.g. the loss)
    _fold_op(frame, measure.path(chain[-1]).ops, frame.event.name + BACKWARD_SUFFIX, backward=True)
    if frame.is_bwd_root:
        duration_us = (frame.event.end_ns - frame.event.start_ns) / 1000
        for path in dict.fromkeys(chain):
            measure.path(path).backward_total_cpu_us += duration_us
        measure.path(chain[-1]).backward_self_cpu_us += duration_us


def _fold_device(device: list[Event], walk: _Walk, measure: IterationMeasure) -> None:
    for event in device:
        launcher = walk.by_correlation.get(event.linked_id)
        if launcher is None or event.name in walk.names:
            continue  # unlinked activity, or the device-side copy of a layer range
        duration_us = (event.end_ns - event.start_ns) / 1000
        if launcher.bwd is not None:
            chain = walk.seq_chains.get(launcher.bwd, ())
            if chain:
                _add_device(
                    measure.path(chain[-1]), launcher.event.name + BACKWARD_SUFFIX, duration_us
                )
                measure.path(chain[-1]).backward_self_device_us += duration_us
            continue
        if not launcher.chain:
            continue
        for path in dict.fromkeys(launcher.chain):
            measure.path(path).total_device_us += duration_us
        _add_device(measure.path(launcher.chain[-1]), launcher.event.name, duration_us)
        measure.path(launcher.chain[-1]).self_device_us += duration_us


def _add_device(measure: PathMeasure, op_name: str, duration_us: float) -> None:
    op = measure.ops.get(op_name)
    if op is not None:  # ranges launch nothing themselves; an op always has its entry by now
        op.self_device_us += duration_us
        op.total_device_us += duration_us


def _raw_event(frame: _Frame) -> RawEvent:
    event = frame.event
    duration = event.end_ns - event.start_ns
    return RawEvent(
        event.name, event.start_ns / 1000, event.end_ns / 1000, (duration - frame.child_ns) / 1000
    )
