"""The state one iteration's walk (`attribution.py`) shares across its threads and helpers, and
the two folds every kind of event ends in: an op under a layer, or time outside every layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hybridprof.runtime.events.frames import (
    BWD,
    CHILD_DMEM,
    CHILD_MEM,
    CHILD_NS,
    DMEM,
    EVENT,
    MEM,
    Frame,
)
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.training_names import RangeNames
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, op_key


@dataclass(slots=True)
class Walk:
    """State shared by the walks of all threads of one iteration."""

    names: Mapping[str, str]
    backward: bool
    keep_raw: bool
    measure: IterationMeasure
    deferred: list[Frame]  # backward frames: their layer is known once every thread is walked
    seq_chains: dict[tuple[int, int], tuple[str, ...]]
    forward_chains: dict[str, tuple[str, ...]]  # path -> layer chain of its first forward call
    by_correlation: dict[int, Frame]
    raw: dict[str, list[Frame]]
    kernels: dict[int, list[tuple[str, int, float]]]
    lookup: RangeNames  # each name: a layer's path, a special range of a training step, or None
    # A backward node nested in another (reentrant checkpointing), by id: the enclosing node's
    # key, its layer when the nested node's own number is not found.
    fallbacks: dict[int, tuple[int, int]]
    # The selected layers' paths: an FSDP2 unit's ranges move to its row only when it has one
    layers: frozenset[str] = frozenset()
    outside_ns: int = 0  # self time of events in no layer (see `add_outside`)
    # Tensor-parallel collectives and waits, in walk order: settled once every layer is known
    # (`tp_comm.settle`)
    tp_notes: list[tuple[Frame, str]] = field(default_factory=list)
    # FSDP2 communication ranges, (event, kind, unit path): their exposed part is worked out
    # from the thread's events once it is walked (`fsdp_names.settle_exposed`)
    fsdp_notes: list[tuple[Event, str, str]] = field(default_factory=list)


def fold_op(frame: Frame, ops: dict[str, OpMeasure], name: str, *, backward: bool) -> None:
    event = frame[EVENT]
    op = ops.get(name)
    if op is None:
        op = ops[name] = OpMeasure(event.name, backward=backward)
    duration = event.end_ns - event.start_ns
    op.calls += 1
    op.total_cpu_us += duration / 1000
    op.self_cpu_us += (duration - frame[CHILD_NS]) / 1000
    if (
        frame[MEM] or frame[CHILD_MEM] or frame[DMEM] or frame[CHILD_DMEM]
    ):  # only with profile_memory
        op.self_cpu_mem += frame[MEM]
        op.cpu_mem += frame[MEM] + frame[CHILD_MEM]
        op.self_device_mem += frame[DMEM]
        op.device_mem += frame[DMEM] + frame[CHILD_DMEM]


def add_outside(frame: Frame, walk: Walk) -> None:
    """An event in no layer: its self time (layers nested in it keep theirs) is outside time,
    and it is an op of the outside row, as an op under a layer is that layer's (a backward node
    or an op in one kept apart from a forward op of the same name)."""
    event = frame[EVENT]
    walk.outside_ns += event.end_ns - event.start_ns - frame[CHILD_NS]
    backward = frame[BWD] is not None
    fold_op(frame, walk.measure.outside_ops, op_key(event.name, backward), backward=backward)


__all__ = ["Walk", "add_outside", "fold_op"]
