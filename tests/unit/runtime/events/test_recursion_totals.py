"""A forward that calls itself: every call counts, its time counts once (issue 25: M-3).

Hand-made events for the two attributions (event by event, and in columns); the strategies on a
real recursive model are in tests/integration/hostile/test_hostile_models.py.
"""

from __future__ import annotations

from hybridprof.runtime.events.attribution import attribute
from hybridprof.runtime.events.event_columns import attribute_columns, attribute_layer_columns
from hybridprof.runtime.events.kineto import Event
from tests.unit.runtime.events.test_event_columns import columns_of

NAMES = {"block": "block", "block.rec": "block.rec", "other": "other"}


def cpu(name: str, start: int, end: int, thread: int = 1) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, thread)


# block (0-100) calls rec, which calls itself twice deep, and then calls rec again afterwards.
RECURSION = [
    cpu("block", 0, 100),
    cpu("block.rec", 10, 60),
    cpu("aten::mm", 11, 19),
    cpu("block.rec", 20, 50),
    cpu("aten::mm", 21, 29),
    cpu("block.rec", 30, 40),
    cpu("aten::mm", 31, 39),
    cpu("block.rec", 70, 80),  # a second, separate call from block: adds its time
    cpu("aten::mm", 71, 79),
]


def rec_numbers(measure) -> tuple[int, float, float]:
    rec = measure.paths["block.rec"]
    return rec.calls, round(rec.self_cpu_us, 6), round(rec.total_cpu_us, 6)


def test_the_walk_counts_each_call_and_the_outermost_time() -> None:
    measure = attribute(RECURSION, NAMES).measure
    # calls: 4; self: every call's own time (50 + 10 in all, nested calls taken out); total: the
    # outermost calls only (10-60 and 70-80), never more than block's 100 us
    assert rec_numbers(measure) == (4, 60.0, 60.0)
    assert measure.paths["block"].total_cpu_us == 100.0


def test_the_columns_count_as_the_walk_does() -> None:
    columns = columns_of(RECURSION)
    assert rec_numbers(attribute_columns(columns, NAMES)) == (4, 60.0, 60.0)
    assert rec_numbers(attribute_layer_columns(columns, NAMES)) == (4, 60.0, 60.0)


def test_recursion_through_another_layer_counts_once_too() -> None:
    events = [
        cpu("block.rec", 0, 100),
        cpu("other", 10, 90),
        cpu("block.rec", 20, 80),  # rec -> other -> rec
        cpu("aten::mm", 21, 79),
        cpu("block.rec", 200, 210, thread=2),  # the same path on another thread: its own call
    ]
    walked = attribute(events, NAMES).measure
    columns = attribute_columns(columns_of(events), NAMES)
    for measure in (walked, columns):
        assert rec_numbers(measure) == (3, 100.0 - 80 + 60 + 10, 110.0)
        assert measure.paths["other"].total_cpu_us == 80.0


def test_memory_counts_once_in_the_total_too() -> None:
    events = [
        cpu("block.rec", 0, 100),
        Event("mem", "[memory]", 5_000, 5_000, 1, nbytes=64),
        cpu("block.rec", 10, 50),
        Event("mem", "[memory]", 20_000, 20_000, 1, nbytes=32),
    ]
    rec = attribute(events, NAMES).measure.paths["block.rec"]
    assert (rec.cpu_mem, rec.self_cpu_mem) == (96, 96)
