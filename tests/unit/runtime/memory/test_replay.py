"""The memory replay on hand-built event lists: contexts (nesting, backward by sequence number,
AccumulateGrad, recomputation, the optimizer), per-layer figures, the step's peak, lifetimes and
the CPU corrections, the timeline's downsampling."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.measures.memory_figures import CATEGORY, FIELD
from hybridprof.runtime.memory.allocations import Allocations, EventArrays, step_allocations
from hybridprof.runtime.memory.contexts import StepContexts, Window, step_contexts
from hybridprof.runtime.memory.layers import Curve, LayerRows, layer_rows, step_peak
from hybridprof.runtime.memory.lifetimes import NEVER, corrected, lifetimes, pairs
from hybridprof.runtime.memory.records import Known, Pack, StepRecords
from hybridprof.runtime.memory.timeline import downsample

NODE = "autograd::engine::evaluate_function: "
NAMES = {"a": "a", "a.b": "a.b"}
T = 1  # the thread


def op(name: str, start: int, end: int, seq: int = -1, fwd: int = 0) -> Event:
    return Event("cpu", name, start, end, T, seq, fwd)


def mem(time: int, nbytes: int) -> Event:
    return Event("mem", "[memory]", time, time, T, nbytes=nbytes)


def step_events() -> list[Event]:
    """Layer a [0,100) holding a.b [10,50); a.b's op makes node seq 7; AccumulateGrad after it;
    an optimizer step. Allocations: a 100 B at 5, a.b 1000 B at 20 freed at 40, a 10 B at 60;
    backward 500 B at 210 freed at 290, the gradient 8 B at 305; the optimizer 4 B at 410."""
    return [
        op("a", 0, 100),
        mem(5, 100),
        op("a.b", 10, 50),
        op("aten::mm", 15, 30, seq=7),
        mem(20, 1000),
        mem(40, -1000),
        mem(60, 10),
        op(NODE + "MmBackward0", 200, 300, seq=7, fwd=T),
        mem(210, 500),
        mem(290, -500),
        op(NODE + "torch::autograd::AccumulateGrad", 300, 310),
        mem(305, 8),
        op("Optimizer.step#SGD.step", 400, 450),
        mem(410, 4),
    ]


def figures(events: list[Event]) -> tuple[LayerRows, StepContexts, Curve, np.ndarray]:
    arrays = EventArrays.of(events)
    contexts = step_contexts(arrays, NAMES, 0)
    alloc = step_allocations(arrays, 0)["cpu"]
    ids = contexts.locate(alloc.thread, alloc.time)
    curve = Curve(alloc.time, np.cumsum(alloc.nbytes))
    rows, _, _ = layer_rows(curve, alloc.nbytes, ids, contexts, [], [], 0)
    return rows, contexts, curve, ids


def value(rows: LayerRows, path: str, field: str) -> int:
    return int(rows.rows[rows.index[path]][FIELD[field]])


def test_each_allocation_goes_to_its_layer_call_node_or_optimizer() -> None:
    rows, contexts, curve, ids = figures(step_events())
    assert value(rows, "a.b", "self_alloc") == value(rows, "a.b", "self_freed") == 1000
    assert value(rows, "a.b", "peak") == 1000
    assert value(rows, "a", "self_alloc") == 110 and value(rows, "a", "alloc") == 1110
    assert value(rows, "a", "peak") == 1100  # within its call: from 0 to 1100
    # backward: the node made by a.b's op, and the AccumulateGrad run after it
    assert value(rows, "a.b", "backward_self_alloc") == 508
    assert (
        value(rows, "a", "backward_alloc") == 508 and value(rows, "a", "backward_self_alloc") == 0
    )
    assert value(rows, "a.b", "backward_peak") == 500
    assert rows.outside[FIELD["self_alloc"]] == 4  # the optimizer's
    peak = step_peak(curve, ids, contexts)
    assert (peak.above, peak.context.phase, peak.context.path) == (1100, "forward", "a.b")
    assert [contexts.contexts[w.context].node for w in contexts.optimizer] == ["SGD.step"]


def test_a_loss_op_outside_the_layers_takes_its_sequence_number_back() -> None:
    events = [
        op("a", 0, 100),
        op("aten::view", 80, 90, seq=5),  # a layer's trailing op sees number 5 ...
        op("aten::mean", 150, 160, seq=5),  # ... the loss, outside every layer, makes the node
        op(NODE + "MeanBackward0", 200, 300, seq=5, fwd=T),
        mem(250, 64),
    ]
    rows, *_ = figures(events)
    assert value(rows, "a", "backward_self_alloc") == 0
    assert rows.outside[FIELD["backward_self_alloc"]] == 64


def test_a_forward_recomputed_in_backward_is_backward_memory_of_its_layer() -> None:
    events = [
        op("a", 0, 100),
        op("a.b", 10, 50),
        op("aten::mm", 15, 30, seq=3),
        op(NODE + "CheckpointFunctionBackward", 200, 300, seq=3, fwd=T),
        op("a.b", 210, 250),  # the recompute
        mem(220, 64),
    ]
    rows, *_ = figures(events)
    assert value(rows, "a.b", "backward_self_alloc") == 64
    assert value(rows, "a.b", "self_alloc") == 0


def test_pairs_follow_addresses_through_reuse() -> None:
    ptr = np.array([1, 1, 1, 2, 1], dtype=np.int64)
    size = np.array([10, -10, 20, -5, -20], dtype=np.int64)
    free_of, loose = pairs(ptr, size)
    assert free_of[0] == 1 and free_of[2] == 4 and loose.tolist() == [3]
    assert pairs(np.array([7], dtype=np.int64), np.array([8], dtype=np.int64))[0][0] == NEVER


def records(**changes: object) -> StepRecords:
    fields: dict[str, object] = {
        "mark_ns": 0,
        "end_ns": 1000,
        "packs": (),
        "grads": (),
        "known": {},
        "deaths": {},
        "optimizer_after": {},
        "hidden": frozenset(),
    }
    fields.update(changes)
    return StepRecords(**fields)  # type: ignore[arg-type]


def step(ptr: list[int], size: list[int], time: list[int] | None = None) -> Allocations:
    count = len(ptr)
    times = np.array(time or [10 * (i + 1) for i in range(count)], dtype=np.int64)
    zeros = np.zeros(count, dtype=np.int64)
    sizes = np.array(size, dtype=np.int64)
    return Allocations(
        "cpu", times, sizes, zeros + T, np.array(ptr, np.int64), np.cumsum(sizes), zeros
    )


def test_a_stale_size_and_an_unreported_free_are_corrected_from_the_storages() -> None:
    known = {
        "cpu": {
            100: Known(2048, CATEGORY["gradients"]),
            200: Known(4096, CATEGORY["gradients"]),
        }
    }
    events = step([100, 300], [-1024, 64])  # the allocator's table had 1024 B for 100
    contexts = StepContexts()
    fixed, ids, notes = corrected(
        events, np.zeros(2, np.int64), contexts, records(known=known, deaths={200: 25})
    )
    assert fixed.nbytes.tolist() == [-2048, 64, -4096]  # and 200's death became a free at 25
    assert fixed.time.tolist() == [10, 20, 25] and fixed.ptr is not None
    assert fixed.ptr.tolist() == [100, 300, 200]
    assert len(ids) == 3 and len(notes) == 2
    life = lifetimes(fixed, ids, records(known=known), {}, None)
    assert life.start_bytes == 2048 + 4096
    at_end = life.live(len(fixed) - 1)
    assert life.by_category(at_end).gradients == 0 and life.by_category(at_end).temporaries == 64


def test_hooks_notes_name_the_allocation_alive_at_their_time() -> None:
    # address 5 holds a saved tensor, is freed, then reused by a temporary
    events = step([5, 5, 5, 9], [128, -128, 128, 32], [10_000, 20_000, 30_000, 40_000])
    saved = Pack(5, 128, "a", 10_500, False, False, "cpu")
    life = lifetimes(
        events,
        np.zeros(4, np.int64),
        records(packs=(saved,), grads=((9, 32, 45_000, "cpu"),)),
        {},
        None,
    )
    first, second = life.at(5, 10_500), life.at(5, 35_000)
    assert first is not None and second is not None and first != second
    assert life.category[first] == CATEGORY["activations"]
    assert life.category[second] == CATEGORY["temporaries"]
    assert life.by_category(life.live(3)).gradients == 32


def test_on_cuda_the_start_is_the_allocators_count_and_the_rest_is_other() -> None:
    events = step([5], [512])
    known = {"cuda": {77: Known(1024, CATEGORY["parameters"])}}
    life = lifetimes(
        Allocations("cuda", events.time, events.nbytes, events.thread, events.ptr, events.total,
                    events.reserved),
        np.zeros(1, np.int64), records(known=known), {}, exact_start=4096,
    )  # fmt: skip
    assert life.start_bytes == 4096
    parts = life.by_category(life.live(-1))
    assert (parts.parameters, parts.other) == (1024, 3072)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(-1000, 1000), min_size=1, max_size=60),
    spans=st.lists(st.tuples(st.integers(0, 700), st.integers(0, 700)), min_size=1, max_size=20),
)
def test_window_tops_are_the_maxima_of_the_curve_inside(
    sizes: list[int], spans: list[tuple[int, int]]
) -> None:
    times = np.arange(len(sizes), dtype=np.int64) * 10
    live = np.cumsum(np.array(sizes, dtype=np.int64))
    windows = [Window(min(a, b), max(a, b), 0) for a, b in spans]
    begun, top, _ = Curve(times, live).tops(windows)
    for w, b, t in zip(windows, begun.tolist(), top.tolist(), strict=True):
        before = [v for time, v in zip(times, live, strict=True) if time < w.start]
        inside = [v for time, v in zip(times, live, strict=True) if w.start <= time < w.end]
        start = int(before[-1]) if before else 0
        assert b == start and t == max([start, *map(int, inside)])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=3000))
def test_downsampling_keeps_the_peak(values: list[int]) -> None:
    live = np.cumsum(np.array(values, dtype=np.int64))
    time = np.arange(len(live), dtype=np.int64)
    keep = downsample(time, [live], points=100)
    assert len(keep) <= 100 and live[keep].max() == live.max()
    assert keep[-1] == len(live) - 1 and (np.diff(keep) > 0).all()
