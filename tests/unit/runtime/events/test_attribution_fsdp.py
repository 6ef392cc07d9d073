"""FSDP2's communication ranges in the walk (hand-made events): each to the unit it names, a
prefetch to the unit it gathers for, a gather in a backward node as a re-gather, and the rows'
times as they were."""

from __future__ import annotations

from hybridprof.runtime.events.attribution import BACKWARD_PREFIX, attribute
from hybridprof.runtime.events.kineto import Event

NAMES = {"blocks.0.fc": "blocks.0.fc", "blocks.1.fc": "blocks.1.fc"}


def cpu(name: str, start: int, end: int, *, seq: int = -1) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, 1, seq, 1)


def step() -> list[Event]:
    return [
        # forward: each unit's pre-forward gathers it, outside its layers' ranges
        cpu("FSDP::pre_forward (blocks.0)", 0, 20),
        cpu("FSDP::all_gather (blocks.0)", 1, 15),
        cpu("gloo:all_gather", 2, 14),
        cpu("FSDP::all_gather_copy_out (blocks.0)", 15, 19),
        cpu("blocks.0.fc", 20, 30),
        cpu("aten::addmm", 21, 29, seq=1),
        cpu("FSDP::pre_forward (blocks.1)", 30, 50),
        cpu("FSDP::all_gather (blocks.1)", 31, 49),
        cpu("blocks.1.fc", 50, 60),
        cpu("aten::addmm", 51, 59, seq=2),
        # backward: blocks.1's node prefetches blocks.0's parameters
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 70, 100, seq=2),
        cpu("FSDP::backward_prefetch for blocks.0", 72, 90),
        cpu("FSDP::all_gather (blocks.0)", 73, 89),
        cpu(BACKWARD_PREFIX + "RegisterPostBackwardFunctionBackward", 100, 130),
        cpu("FSDP::post_backward_reduce (blocks.1)", 101, 128),
    ]


def test_each_range_goes_to_the_unit_it_names() -> None:
    comm = attribute(step(), NAMES, backward=True).measure.comm
    found = {key: (m.calls, m.time_us) for key, m in comm.items()}
    assert found == {
        ("blocks.0", "all_gather"): (1, 14.0),
        ("blocks.0", "copy_out"): (1, 4.0),
        ("blocks.1", "all_gather"): (1, 18.0),
        ("blocks.0", "regather"): (1, 16.0),  # the prefetch in blocks.1's node is blocks.0's
        ("blocks.1", "reduce_scatter"): (1, 27.0),
    }


def test_the_rows_times_are_as_without_the_ranges() -> None:
    renamed = [e._replace(name="x" + e.name) if e.name.startswith("FSDP") else e for e in step()]
    with_ranges = attribute(step(), NAMES, backward=True).measure
    without = attribute(renamed, NAMES, backward=True).measure
    assert without.comm == {}
    assert with_ranges.outside_cpu_us == without.outside_cpu_us
    for path in NAMES:
        a, b = with_ranges.paths[path], without.paths[path]
        assert (a.self_cpu_us, a.backward_self_cpu_us) == (b.self_cpu_us, b.backward_self_cpu_us)


def test_the_exposed_part_leaves_out_the_compute_around_the_collective() -> None:
    events = [
        cpu("FSDP::pre_forward (blocks.0)", 0, 40),
        cpu("FSDP::all_gather (blocks.0)", 0, 30),  # starts with its parent: found all the same
        cpu("fsdp::all_gather_copy_in", 1, 5),  # compute: copying the shards into the buffer
        cpu("aten::copy_", 2, 4),  # nested in it: counted once, with it
        cpu("c10d::_allgather_base_", 5, 8),  # the collective's call: exposed
        cpu("record_param_comms", 6, 7),
        cpu("FSDP::all_gather_copy_out (blocks.0)", 30, 38),
        cpu("aten::split_with_sizes_copy", 31, 37),  # compute: the copy-out itself
    ]
    comm = attribute(events, NAMES, backward=True).measure.comm
    gather, copy = comm[("blocks.0", "all_gather")], comm[("blocks.0", "copy_out")]
    assert (gather.time_us, gather.exposed_us) == (30.0, 26.0)  # the wait is the range's self time
    assert (copy.time_us, copy.exposed_us) == (8.0, 2.0)


def test_without_compute_inside_every_range_is_exposed() -> None:
    comm = attribute(step(), NAMES, backward=True).measure.comm
    assert all(m.exposed_us == m.time_us for m in comm.values())


def test_the_backends_thread_is_left_out_with_the_ops_inside_its_transfers() -> None:
    def on(thread: int, name: str, start: int, end: int) -> Event:
        return Event("cpu", name, start * 1000, end * 1000, thread)

    gloo = [
        on(7, "gloo:all_gather", 2, 14),
        on(7, "aten::view", 3, 4),  # gloo's own ops, inside the transfer
        on(7, "gloo:all_reduce", 101, 127),
        on(7, "aten::div_", 120, 125),
    ]
    measure = attribute(step() + gloo, NAMES, backward=True).measure
    alone = attribute(step(), NAMES, backward=True).measure
    assert measure.total_cpu_us == alone.total_cpu_us
    assert measure.outside_cpu_us == alone.outside_cpu_us and not measure.outside_ops.keys() - {
        *alone.outside_ops
    }
    computing = [*gloo, on(7, "aten::mm", 200, 210)]  # an op in no transfer: a thread of work
    assert attribute(step() + computing, NAMES, backward=True).measure.total_cpu_us > (
        alone.total_cpu_us
    )


UNITS = {**NAMES, "blocks.0": "blocks.0", "blocks.1": "blocks.1"}


def sharded_step() -> list[Event]:
    """The two units selected as layers (a leaves-only selection takes them), their hooks'
    ranges outside their forward, a prefetch in a leaf's backward node, a reduce-scatter in a
    node made outside every layer and one in no node at all."""
    return [
        cpu("FSDP::pre_forward (blocks.0)", 0, 20),  # outside every layer
        cpu("FSDP::all_gather (blocks.0)", 1, 15),
        cpu("c10d::_allgather_base_", 2, 14),
        cpu("FSDP::all_gather_copy_out (blocks.0)", 15, 19),
        cpu("blocks.0", 20, 30),
        cpu("blocks.0.fc", 21, 29),
        cpu("aten::addmm", 22, 28, seq=1),
        cpu("FSDP::post_forward (blocks.0)", 30, 32),
        cpu("FSDP::pre_forward (blocks.1)", 32, 50),
        cpu("FSDP::all_gather (blocks.1)", 33, 49),
        cpu("blocks.1", 50, 60),
        cpu("blocks.1.fc", 51, 59),
        cpu("aten::addmm", 52, 58, seq=2),
        # blocks.1.fc's node prefetches blocks.0's parameters
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 70, 100, seq=2),
        cpu("FSDP::backward_prefetch for blocks.0", 72, 90),
        cpu("FSDP::all_gather (blocks.0)", 73, 89),
        cpu("aten::mm", 91, 99),
        cpu(BACKWARD_PREFIX + "RegisterPostBackwardFunctionBackward", 100, 130, seq=9),
        cpu("FSDP::post_backward_reduce (blocks.1)", 101, 128),
        cpu("FSDP::post_backward_reduce (blocks.0)", 130, 140),  # after the last node, in none
    ]


def test_each_units_ranges_move_to_its_row_and_the_rows_still_add_up() -> None:
    measure = attribute(sharded_step(), UNITS, backward=True).measure
    rows = measure.paths
    b0, b1, fc1 = rows["blocks.0"], rows["blocks.1"], rows["blocks.1.fc"]
    # its forward's 2 us, its pre- and post-forward hooks 22; its prefetch in blocks.1.fc's node
    # and its reduce-scatter in none 28
    assert (b0.self_cpu_us, b0.total_cpu_us) == (24, 32)
    assert (b0.backward_self_cpu_us, b0.backward_total_cpu_us) == (28, 28)
    assert (b1.self_cpu_us, b1.backward_self_cpu_us) == (20, 27)
    assert fc1.backward_self_cpu_us == 12  # its node less the prefetch for blocks.0
    assert b1.backward_total_cpu_us == 12 + 27  # its leaf's backward and its reduce-scatter
    assert measure.outside_cpu_us == 3  # the post-backward node's own time, no FSDP2 range
    assert not [name for name in measure.outside_ops if "FSDP" in name or "c10d" in name]
    assert "c10d::_allgather_base_" in b0.ops and "aten::mm [bwd]" in fc1.ops
    own = sum(p.self_cpu_us + p.backward_self_cpu_us for p in rows.values())
    assert own + measure.outside_cpu_us == measure.total_cpu_us == 130
    # the communication columns are as before: they read the ranges, not where they went
    assert attribute(sharded_step(), NAMES, backward=True).measure.comm == measure.comm


def test_a_range_of_a_unit_with_no_row_stays_where_it_ran() -> None:
    events = sharded_step()
    with_rows = attribute(events, UNITS, backward=True).measure
    without = attribute(events, NAMES, backward=True).measure  # the units are not selected
    # the hooks' ranges (and the units' own events, ops now) are outside
    assert without.outside_cpu_us == 20 + 2 + 2 + 18 + 2 + 30 + 10
    assert with_rows.outside_cpu_us == 3
    assert without.paths["blocks.1.fc"].backward_self_cpu_us == 30  # the prefetch stays in it
