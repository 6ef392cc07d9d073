"""What links an event to a layer other than its place in the tree: a backward node to the
layer whose forward made it (by sequence number, see `attribution.py`), a recomputed forward and
the op that ran it to their layers, a device kernel to the op that launched it (by correlation
id). Run after every thread is walked: the forward op may be on another thread."""

from __future__ import annotations

from hybridprof.runtime.events.frames import (
    BWD,
    BWD_ROOT,
    CHAIN,
    CHILD_NS,
    EVENT,
    KIND,
    MEASURE,
    MERGED,
    NESTED_NS,
    OPT,
    PARENT,
    RANGE,
    Frame,
)
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.walk import Walk, add_outside, fold_op
from hybridprof.runtime.measures.iteration import OpMeasure, PathMeasure, op_key


def backward_root(stack: list[Frame]) -> Frame:
    """The backward node event a recompute range runs in (the innermost BWD_ROOT on the
    stack)."""
    return next(frame for frame in reversed(stack) if frame[KIND] == BWD_ROOT)


def backward_chain(frame: Frame, walk: Walk) -> tuple[str, ...] | None:
    """The layers of the forward op that made the node `frame` belongs to (None: outside)."""
    chain = walk.seq_chains.get(frame[BWD])
    return chain if chain or not walk.fallbacks else fallback_chain(frame, walk)


def fallback_chain(frame: Frame, walk: Walk) -> tuple[str, ...] | None:
    """For a nested node whose own number is not found: the enclosing node's layers."""
    root = frame
    while root is not None and id(root) not in walk.fallbacks:
        root = root[PARENT]
    return None if root is None else walk.seq_chains.get(walk.fallbacks[id(root)])


def fold_backward(frame: Frame, walk: Walk) -> None:
    chain = walk.seq_chains.get(frame[BWD])
    if not chain and walk.fallbacks:
        chain = fallback_chain(frame, walk)
    if not chain:  # a node whose forward ran outside every selected layer (e.g. the loss)
        add_outside(frame, walk)
        return
    measure = walk.measure
    event = frame[EVENT]
    fold_op(frame, measure.path(chain[-1]).ops, op_key(event.name, backward=True), backward=True)
    if frame[KIND] == BWD_ROOT:  # its time less the forwards recomputed in it (NESTED_NS)
        duration_us = (event.end_ns - event.start_ns - frame[NESTED_NS]) / 1000
        for path in dict.fromkeys(chain):
            measure.path(path).backward_total_cpu_us += duration_us
        measure.path(chain[-1]).backward_self_cpu_us += duration_us


def fold_recompute(frame: Frame, walk: Walk) -> None:
    """A recomputed forward call: backward time of its layer, never a forward call."""
    event, measure = frame[EVENT], frame[MEASURE]
    duration = event.end_ns - event.start_ns
    measure.backward_self_cpu_us += (duration - frame[NESTED_NS]) / 1000
    if frame[CHAIN].count(measure.path) == 1:  # a recursive call is in its caller's total
        measure.backward_total_cpu_us += duration / 1000
    if len(frame[CHAIN]) == 1:  # outermost recomputed range: its forward's enclosing layers too
        for path in dict.fromkeys(walk.forward_chains.get(measure.path, ())):
            if path != measure.path:
                walk.measure.path(path).backward_total_cpu_us += duration / 1000


def fold_served(frame: Frame, walk: Walk) -> None:
    """An FSDP2 range for unit u run in a backward node: u's backward self time (less the ranges
    for other units nested in it: a prefetch in u's pre-backward), and the backward total of u and
    the layers its forward ran in. The node's layer (and its callers) lost the range's time
    (its NESTED_NS); a range nested in another unit's (or a recompute) range moves out of that
    one's callers instead, so each layer keeps what its own calls, hooks included, took."""
    event, measure = frame[EVENT], frame[MEASURE]
    duration_us = (event.end_ns - event.start_ns) / 1000
    measure.backward_self_cpu_us += duration_us - frame[NESTED_NS] / 1000
    own = walk.forward_chains.get(measure.path) or (measure.path,)
    chain = frame[CHAIN]  # the enclosing range's layers, then u
    outer = (walk.forward_chains.get(chain[-2]) or chain[-2:-1]) if len(chain) > 1 else ()
    for path in dict.fromkeys(own):
        if path not in outer:
            walk.measure.path(path).backward_total_cpu_us += duration_us
    for path in dict.fromkeys(outer):
        if path not in own:
            walk.measure.path(path).backward_total_cpu_us -= duration_us


def fold_host(frame: Frame, walk: Walk) -> None:
    """The op that ran a recompute: its self time is checkpoint bookkeeping, the caller's."""
    callers = walk.forward_chains.get(frame[MEASURE].path, ())[:-1]
    if not callers:  # the checkpoint was called outside every selected layer
        add_outside(frame, walk)
        return
    event = frame[EVENT]
    self_us = (event.end_ns - event.start_ns - frame[CHILD_NS]) / 1000
    caller = walk.measure.path(callers[-1])
    fold_op(frame, caller.ops, op_key(event.name, backward=True), backward=True)
    caller.backward_self_cpu_us += self_us
    for path in dict.fromkeys(callers):
        walk.measure.path(path).backward_total_cpu_us += self_us


def fold_device(device: list[Event], walk: Walk) -> None:
    measure = walk.measure
    for event in device:
        launcher = walk.by_correlation.get(event.linked_id)
        if launcher is None or event.name in walk.names:
            continue  # unlinked activity, or the device-side copy of a layer range
        duration_us = (event.end_ns - event.start_ns) / 1000
        if walk.keep_raw:
            _keep_kernel(walk, launcher, event.name, duration_us)
        if launcher[OPT] is not None:  # launched by the optimizer
            row = measure.optimizer_measure().row
            _add_device(row, launcher[EVENT].name, duration_us)
            row.self_device_us += duration_us
            continue
        if launcher[BWD] is not None and launcher[RANGE] is not None:  # a recomputed forward
            layer = launcher[RANGE][MEASURE]
            _add_device(layer, op_key(launcher[EVENT].name, backward=True), duration_us)
            layer.backward_self_device_us += duration_us
            continue
        if launcher[BWD] is not None:
            chain = backward_chain(launcher, walk) or ()
            if chain:
                _add_device(
                    measure.path(chain[-1]),
                    op_key(launcher[EVENT].name, backward=True),
                    duration_us,
                )
                measure.path(chain[-1]).backward_self_device_us += duration_us
            else:  # launched by a backward op in no layer (the loss's): an outside op's
                _add_outside_device(measure.outside_ops, launcher, True, duration_us)
            continue
        chain = launcher[CHAIN]
        if not chain:
            _add_outside_device(measure.outside_ops, launcher, False, duration_us)
            continue
        for path in dict.fromkeys(chain):
            measure.path(path).total_device_us += duration_us
        _add_device(measure.path(chain[-1]), launcher[EVENT].name, duration_us)
        measure.path(chain[-1]).self_device_us += duration_us


def _keep_kernel(walk: Walk, launcher: Frame, name: str, duration_us: float) -> None:
    """Note a kernel under its launching op for Profile.raw(); a merged op's kernels belong to
    the op it was merged into (torch lifts them up the same way)."""
    while launcher[KIND] == MERGED:
        launcher = launcher[PARENT]
    walk.kernels.setdefault(id(launcher), []).append((name, 0, duration_us))


def _add_device(measure: PathMeasure, op_name: str, duration_us: float) -> None:
    _add_op_device(measure.ops, op_name, duration_us)


def _add_outside_device(
    ops: dict[str, OpMeasure], launcher: Frame, backward: bool, duration_us: float
) -> None:
    _add_op_device(ops, op_key(launcher[EVENT].name, backward=backward), duration_us)


def _add_op_device(ops: dict[str, OpMeasure], op_name: str, duration_us: float) -> None:
    op = ops.get(op_name)
    if op is not None:  # ranges launch nothing themselves; an op always has its entry by now
        op.self_device_us += duration_us
        op.total_device_us += duration_us


__all__ = [
    "backward_chain",
    "backward_root",
    "fallback_chain",
    "fold_backward",
    "fold_device",
    "fold_host",
    "fold_recompute",
    "fold_served",
]
