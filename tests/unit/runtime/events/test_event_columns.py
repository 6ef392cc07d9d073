"""The columnar attribution gives exactly what the event-by-event walk gives (forward, CPU).

Hand-made events cover the cases by name (nesting, sharing, threads, merged ops, outside time
and its ops);
generated event trees (hypothesis) cover the rest, overlapping and zero-length events included,
where the vectorised parent search must hand over to the stack walk.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridprof.runtime.events.attribution import ROOT_RANGE, attribute
from hybridprof.runtime.events.event_columns import (
    EventColumns,
    attribute_columns,
    attribute_layer_columns,
)
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.measures.iteration import IterationMeasure

NAMES = {ROOT_RANGE: "", "block": "block", "block.fc": "block.fc", "act": "act"}


def columns_of(events: list[Event]) -> EventColumns:
    index: dict[str, int] = {}
    code = [index.setdefault(e.name, len(index)) for e in events]
    return EventColumns(
        list(index),
        np.array(code, dtype=np.int64),
        np.array([e.start_ns for e in events], dtype=np.int64),
        np.array([e.end_ns for e in events], dtype=np.int64),
        np.array([e.thread for e in events], dtype=np.int64),
    )


def numbers(measure: IterationMeasure) -> dict[str, object]:
    """Every number of a forward CPU measure, rounded below the float noise of summing in
    another order."""
    out: dict[str, object] = {
        "total": round(measure.total_cpu_us, 6),
        "outside": round(measure.outside_cpu_us or 0.0, 6),
    }
    for path, m in measure.paths.items():
        out[path] = (m.calls, round(m.self_cpu_us, 6), round(m.total_cpu_us, 6))
        for key, op in m.ops.items():
            out[f"{path}/{key}"] = (op.calls, round(op.self_cpu_us, 6), round(op.total_cpu_us, 6))
    for key, op in measure.outside_ops.items():  # the outside row's ops
        out[f"(outside)/{key}"] = (op.calls, round(op.self_cpu_us, 6), round(op.total_cpu_us, 6))
    return out


def layer_numbers(measure: IterationMeasure) -> dict[str, tuple[int, float, float]]:
    return {
        p: (m.calls, round(m.self_cpu_us, 6), round(m.total_cpu_us, 6))
        for p, m in measure.paths.items()
    }


def assert_same(events: list[Event], nested: bool = True) -> None:
    """The columns give the walk's numbers; where the events nest, the ranges alone give its
    layer numbers (else a range may nest in another only through an op that outlives it, and
    then self times and totals differ: a range inside a range of its own path adds nothing to
    the total; only the calls are the same)."""
    columns = columns_of(events)
    assert columns.events() == events
    walked = attribute(events, NAMES).measure
    assert numbers(attribute_columns(columns, NAMES)) == numbers(walked)
    layers = layer_numbers(attribute_layer_columns(columns, NAMES))
    if nested:
        assert layers == layer_numbers(walked)
    else:
        assert {p: c for p, (c, _, _) in layers.items()} == {
            p: c for p, (c, _, _) in layer_numbers(walked).items()
        }


def cpu(name: str, start: int, end: int, thread: int = 1) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, thread)


def test_nesting_sharing_and_inline_ops() -> None:
    assert_same(
        [
            cpu(ROOT_RANGE, 0, 100),
            cpu("block", 10, 60),
            cpu("aten::view", 12, 15),
            cpu("block.fc", 20, 50),
            cpu("aten::linear", 21, 49),
            cpu("aten::addmm", 25, 45),
            cpu("act", 52, 58),
            cpu("aten::relu", 53, 57),
            cpu("aten::add", 70, 80),
            cpu("act", 80, 90),
            cpu("aten::relu", 81, 89),
        ]
    )


def test_threads_and_a_range_inside_an_op() -> None:
    assert_same(
        [
            cpu("act", 0, 10, thread=1),
            cpu("aten::mul", 2, 8, thread=2),
            cpu("block", 20, 60, thread=2),
            cpu("aten::conv", 21, 59, thread=2),
            cpu("block.fc", 30, 40, thread=2),  # a layer called from inside an op
            cpu("aten::mm", 31, 39, thread=2),
        ]
    )


def test_merged_ops_and_outside_time() -> None:
    assert_same(
        [
            cpu("aten::zeros", 0, 4),
            cpu("step", 5, 200),  # the user's own range: only its self time is outside
            cpu("act", 10, 100),
            cpu("aten::dropout", 11, 90),
            cpu("aten::div_", 20, 50),
            cpu("aten::div_", 21, 49),
            cpu("aten::to", 22, 48),
            cpu("aten::add", 110, 150),  # a chain of three outside every layer: one call
            cpu("aten::add", 111, 149),
            cpu("aten::add", 112, 148),
            cpu("aten::div_", 160, 190),  # two children: two calls
            cpu("aten::div_", 161, 170),
            cpu("aten::mul", 171, 180),
        ]
    )


def test_overlapping_and_zero_length_events_follow_the_stack_walk() -> None:
    assert_same(
        [
            cpu("block", 0, 50),
            cpu("aten::mm", 10, 60),  # ends after its parent
            cpu("aten::add", 55, 58),
            cpu("act", 70, 70),  # zero length
            cpu("aten::relu", 70, 75),
        ],
        nested=False,
    )


OP_NAMES = ("aten::add", "aten::mul", "aten::div_")


@st.composite
def event_trees(draw: st.DrawFn) -> tuple[list[Event], bool]:
    """Nested events on one or two threads, ranges and ops mixed, sometimes a parent's only child
    of its name; with `overlap`, an event may end after its parent does."""
    overlap = draw(st.booleans())
    events: list[Event] = []

    def fill(start: int, end: int, thread: int, depth: int) -> None:
        at = start
        while at < end - 2 and len(events) < 60:
            length = draw(st.integers(1, max(1, (end - at) // 2)))
            if at + length > end:
                break
            name = draw(st.sampled_from([*OP_NAMES, *NAMES]))
            stretch = draw(st.integers(0, 3)) if overlap else 0
            events.append(Event("cpu", name, at, at + length + stretch, thread))
            if depth < 4 and length > 3 and draw(st.booleans()):
                if draw(st.booleans()) and name in OP_NAMES:  # its only child, same name
                    events.append(Event("cpu", name, at + 1, at + length - 1, thread))
                else:
                    fill(at + 1, at + length - 1, thread, depth + 1)
            at += length + draw(st.integers(0, 3))

    for thread in range(draw(st.integers(1, 2))):
        fill(0, draw(st.integers(10, 400)), thread + 1, 0)
    return events, not overlap


@settings(max_examples=150, deadline=None)
@given(event_trees())
def test_generated_trees_give_the_walks_numbers(tree: tuple[list[Event], bool]) -> None:
    assert_same(*tree)


def _profiled_with_mark(threads: int) -> tuple[object, tuple[int, int]]:
    """A real profiler session: a warm step, the measure mark (with the wall clock around it),
    then the measured step; with `threads` > 1, a second thread runs ops across the mark."""
    import threading
    import time

    import torch
    from torch import nn

    from hybridprof.runtime.events.kineto import MEASURE_MARK

    model = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(30)])
    x = torch.randn(4, 8)
    mark = torch.autograd.profiler.record_function
    stop = threading.Event()

    def other() -> None:
        while not stop.is_set():
            torch.relu(x)

    helper = threading.Thread(target=other) if threads > 1 else None
    profiler = torch.autograd.profiler.profile()
    with profiler:
        if helper is not None:
            helper.start()
        model(x)
        before = time.time_ns()
        with mark(MEASURE_MARK):
            pass
        window = (before, time.time_ns())
        model(x)
        stop.set()
        if helper is not None:
            helper.join()
    return profiler, window


def _decoded(columns: EventColumns) -> tuple[list[str], list[int], list[int], list[int]]:
    return (
        [columns.names[c] for c in columns.code.tolist()],
        columns.start.tolist(),
        columns.end.tolist(),
        columns.thread.tolist(),
    )


def test_reading_from_the_mark_gives_the_columns_of_the_full_read() -> None:
    """The warm step's events are skipped unread when the wall clock around the mark finds it;
    the columns are those of reading every event and dropping those before the mark."""
    from hybridprof.runtime.events.event_columns import _measured_from, read_columns

    for threads in (1, 2):
        profiler, window = _profiled_with_mark(threads)
        raw = profiler.kineto_results.events()  # type: ignore[attr-defined]
        start = np.array([event.start_ns() for event in raw], dtype=np.int64)
        assert _measured_from(raw, type(raw[0]), start, window) > 0  # the warm step skipped
        full = read_columns(profiler)
        assert _decoded(read_columns(profiler, window)) == _decoded(full)
        far = (window[0] - 10**12, window[1] - 10**12)  # a clock that does not match: full read
        assert _decoded(read_columns(profiler, far)) == _decoded(full)
        names = _decoded(full)[0]
        assert names.count("aten::linear") == 30  # the measured step's only


def test_the_outside_time_is_made_of_its_ops() -> None:
    """Each event in no layer is an op of the outside row (a merged chain one call, the user's
    own range its self time), and their self times add up to the outside time."""
    events = [
        cpu("aten::zeros", 0, 4),
        cpu("step", 5, 200),
        cpu("act", 10, 100),
        cpu("aten::relu", 11, 90),
        cpu("aten::add", 110, 150),
        cpu("aten::add", 111, 149),
        cpu("aten::mul", 160, 190),
    ]
    for measure in (attribute(events, NAMES).measure, attribute_columns(columns_of(events), NAMES)):
        ops = {k: (o.calls, o.self_cpu_us, o.total_cpu_us) for k, o in measure.outside_ops.items()}
        assert ops == {
            "aten::zeros": (1, 4.0, 4.0),
            "step": (1, 195.0 - 90.0 - 40.0 - 30.0, 195.0),
            "aten::add": (1, 40.0, 40.0),
            "aten::mul": (1, 30.0, 30.0),
        }
        assert sum(op.self_cpu_us for op in measure.outside_ops.values()) == measure.outside_cpu_us
        assert "aten::relu" in measure.paths["act"].ops and "aten::relu" not in ops
