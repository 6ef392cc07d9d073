"""Tensor-parallel collectives after the walk: each one's time and bytes to the layer it serves,
and a wait to the layer whose collective it waits for.

The walk notes every functional collective and every `wait_tensor` (`events/tp_names.py`) where it
ran; once every thread is walked, backward nodes have their layers and the notes are settled, in
start order:

- a collective is the layer's it ran in (forward: the innermost layer range, hooks included;
  backward: its node's layer): "tp_forward" or "tp_backward" communication of that layer, its
  time the op's, its bytes the op's input's (`Event.nbytes`, from the recorded shapes);
- a wait is for the oldest collective issued before it on its thread, not waited for yet, that
  sent as many bytes (the result of an async collective is waited for at its first use, in the
  order it is used: torch's functional collectives give no handle in the events to match on).
  Its time is that collective's layer's, in the same direction. A wait run elsewhere (the next
  layer's matmul, the loss) is moved there: its self time and its op row leave the layer (or the
  outside row) it ran in, so each layer's own time is its compute and its communication, and the
  rows still add up to the step.

Torch-free.
"""

from __future__ import annotations

from collections import defaultdict

from hybridprof.runtime.events.frames import BWD, CHILD_NS, EVENT, MEASURE, OPT, RANGE, Frame
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.links import fallback_chain
from hybridprof.runtime.events.tp_names import is_backend_event
from hybridprof.runtime.events.walk import Walk, fold_op
from hybridprof.runtime.measures.iteration import OpMeasure, op_key

# Where an event's time was counted: (layer path, or None outside every layer; backward)
Place = tuple[str | None, bool]


def backend_thread(events: list[Event]) -> bool:
    """A thread of the communication backend alone (gloo's worker, doing the transfers): its
    time is no time of the profiled thread, which waits for it in `wait_tensor` (or FSDP2's
    ranges) if at all. Every top-level event on it is the backend's; ops nested in one are the
    transfer's own (gloo's reduce-scatter divides and copies its result there)."""
    reach, found = -1, False
    for event in sorted((e for e in events if e.kind == "cpu"), key=lambda e: e.start_ns):
        if is_backend_event(event.name):
            reach, found = max(reach, event.end_ns), True
        elif event.start_ns >= reach:
            return False  # an op in no transfer: a thread that computes
    return found


def settle(walk: Walk) -> None:
    pending: dict[int, list[tuple[int, Place]]] = defaultdict(list)  # thread -> (bytes, place)
    for frame, what in sorted(walk.tp_notes, key=lambda note: note[0][EVENT].start_ns):
        if frame[OPT] is not None:
            continue  # inside the optimizer: its time is the optimizer's
        event: Event = frame[EVENT]
        place = _place(frame, walk)
        time_us = (event.end_ns - event.start_ns) / 1000
        if what == "collective":
            pending[event.thread].append((event.nbytes, place))
            if place[0] is not None:
                walk.measure.add_comm(place[0], _kind(place), time_us, event.nbytes)
            continue
        served = _take(pending[event.thread], event.nbytes) or place
        if served != place:
            _move(frame, place, served, walk)
        if served[0] is not None:
            walk.measure.add_comm(served[0], _kind(served), time_us, calls=0)


def _kind(place: Place) -> str:
    return "tp_backward" if place[1] else "tp_forward"


def _place(frame: Frame, walk: Walk) -> Place:
    if frame[BWD] is None or frame[RANGE] is not None:  # a forward op, or a recomputed one
        layer = frame[RANGE]
        return (layer[MEASURE].path if layer is not None else None), frame[BWD] is not None
    chain = walk.seq_chains.get(frame[BWD])
    if not chain and walk.fallbacks:
        chain = fallback_chain(frame, walk)
    return (chain[-1] if chain else None), True


def _take(pending: list[tuple[int, Place]], nbytes: int) -> Place | None:
    for index, (sent, place) in enumerate(pending):
        if sent == nbytes:
            del pending[index]
            return place
    return None


def _move(frame: Frame, source: Place, target: Place, walk: Walk) -> None:
    """The wait's self time and op row out of `source`, into `target`."""
    event = frame[EVENT]
    self_ns = event.end_ns - event.start_ns - frame[CHILD_NS]
    _take_out(frame, source, self_ns, walk)
    path, backward = target
    assert path is not None  # a collective noted outside every layer is served by none
    measure = walk.measure.path(path)
    fold_op(frame, measure.ops, op_key(event.name, backward), backward=backward)
    if backward:
        measure.backward_self_cpu_us += self_ns / 1000
        measure.backward_total_cpu_us += self_ns / 1000
    else:
        measure.self_cpu_us += self_ns / 1000
        measure.total_cpu_us += self_ns / 1000


def _take_out(frame: Frame, source: Place, self_ns: int, walk: Walk) -> None:
    event = frame[EVENT]
    path, backward = source
    key = op_key(event.name, backward)
    if path is None:
        walk.outside_ns -= self_ns
        ops = walk.measure.outside_ops
    else:
        measure = walk.measure.path(path)
        ops = measure.ops
        if backward:
            measure.backward_self_cpu_us -= self_ns / 1000
            measure.backward_total_cpu_us -= self_ns / 1000
        else:
            measure.self_cpu_us -= self_ns / 1000
            measure.total_cpu_us -= self_ns / 1000
    op = ops.get(key)
    if op is not None:
        _unfold(op, frame)
        if op.calls <= 0:
            del ops[key]


def _unfold(op: OpMeasure, frame: Frame) -> None:
    event = frame[EVENT]
    duration = event.end_ns - event.start_ns
    op.calls -= 1
    op.total_cpu_us -= duration / 1000
    op.self_cpu_us -= (duration - frame[CHILD_NS]) / 1000


__all__ = ["backend_thread", "settle"]
