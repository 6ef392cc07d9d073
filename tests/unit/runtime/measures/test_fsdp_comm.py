from __future__ import annotations

from hybridprof.datamodel import Stat
from hybridprof.runtime.measures.fsdp_comm import unit_comm
from hybridprof.runtime.measures.iteration import CommMeasure


def test_units_in_order_kinds_in_step_order_bytes_from_calls() -> None:
    iterations = [
        {
            ("b", "reduce_scatter"): CommMeasure(1, 30.0),
            ("b", "all_gather"): CommMeasure(1, 10.0),
            ("a", "all_gather"): CommMeasure(2, 4.0),
        },
        {("b", "all_gather"): CommMeasure(1, 20.0), ("a", "all_gather"): CommMeasure(2, 6.0)},
        {("b", "all_gather"): CommMeasure(1, 15.0), ("a", "copy_out"): CommMeasure(1, 1.0)},
    ]
    found = unit_comm(iterations, (("a", 100, 50), ("b", 800, 400)))
    assert [(c.path, c.kind) for c in found] == [
        ("b", "all_gather"),
        ("b", "reduce_scatter"),
        ("a", "all_gather"),
        ("a", "copy_out"),
    ]
    b_gather, b_scatter, a_gather, a_copy = found
    assert b_gather.time_us == Stat(15.0, 10.0, 20.0) and b_gather.nbytes == 800
    assert b_scatter.time_us == Stat(0.0, 0.0, 30.0)  # an iteration without it counts 0
    assert b_scatter.calls == 0 and b_scatter.nbytes == 0  # median calls: 0 of 3
    assert a_gather.calls == 2 and a_gather.nbytes == 200
    assert a_copy.nbytes == 0  # a copy-out moves nothing between ranks


def test_a_unit_without_sizes_has_times_and_no_bytes() -> None:
    (only,) = unit_comm([{("x", "regather"): CommMeasure(1, 5.0)}], ())
    assert only.time_us.median == 5.0 and only.nbytes == 0
    assert unit_comm([{}, {}], ()) == ()


def test_each_unit_keeps_its_time_per_iteration_and_its_exposed_part() -> None:
    iterations = [
        {("a", "all_gather"): CommMeasure(1, 10.04, exposed_us=9.0)},
        {},
        {("a", "all_gather"): CommMeasure(1, 30.0, exposed_us=25.0)},
    ]
    (gather,) = unit_comm(iterations, ())
    assert gather.iteration_us == (10.0, 0.0, 30.0)  # 0.1 us kept; an iteration without it: 0
    assert gather.exposed_us == Stat(9.0, 0.0, 25.0)
