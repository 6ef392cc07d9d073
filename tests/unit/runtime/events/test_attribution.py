"""Attribution of hand-made raw events (no profiler): nesting, sharing, backward, memory,
devices."""

from __future__ import annotations

from hybridprof.runtime.events.attribution import BACKWARD_PREFIX, ROOT_RANGE, attribute, range_name
from hybridprof.runtime.events.kineto import MEMORY_EVENT, Event

NAMES = {ROOT_RANGE: "", "block": "block", "block.fc": "block.fc", "act": "act"}


def cpu(
    name: str, start: int, end: int, *, seq: int = -1, fwd: int = 0, corr: int = 0, thread: int = 1
) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, thread, seq, fwd, corr)


def test_range_name_gives_the_root_a_visible_name() -> None:
    assert range_name("") == ROOT_RANGE
    assert range_name("features.0") == "features.0"


def test_nested_ranges_self_time_excludes_selected_children() -> None:
    events = [
        cpu(ROOT_RANGE, 0, 100),
        cpu("block", 10, 60),
        cpu("aten::view", 12, 15),
        cpu("block.fc", 20, 50),
        cpu("aten::linear", 21, 49),
        cpu("aten::addmm", 25, 45),
        cpu("aten::add", 70, 80),  # an inline op of the root's forward
    ]
    measure = attribute(events, NAMES).measure
    root, block, fc = measure.paths[""], measure.paths["block"], measure.paths["block.fc"]
    assert (root.total_cpu_us, root.self_cpu_us) == (100, 50)
    assert (block.total_cpu_us, block.self_cpu_us) == (50, 20)
    assert (fc.total_cpu_us, fc.self_cpu_us) == (30, 30)
    assert set(fc.ops) == {"aten::linear", "aten::addmm"}
    assert fc.ops["aten::linear"].self_cpu_us == 8 and fc.ops["aten::linear"].total_cpu_us == 28
    assert set(block.ops) == {"aten::view"} and set(root.ops) == {"aten::add"}
    assert measure.total_cpu_us == 100


def test_a_module_called_twice_sums_its_calls() -> None:
    events = [
        cpu("act", 0, 10),
        cpu("aten::relu", 1, 9),
        cpu("act", 20, 26),
        cpu("aten::relu", 21, 25),
    ]
    act = attribute(events, NAMES).measure.paths["act"]
    assert act.calls == 2 and act.total_cpu_us == 16
    assert act.ops["aten::relu"].calls == 2 and act.ops["aten::relu"].self_cpu_us == 12


def test_threads_are_walked_separately() -> None:
    events = [cpu("act", 0, 10, thread=1), cpu("aten::mul", 2, 8, thread=2)]
    measure = attribute(events, NAMES).measure
    assert measure.paths["act"].ops == {}  # the other thread's op is not inside this range
    assert measure.total_cpu_us == 16


def test_backward_nodes_go_to_the_layer_whose_forward_made_them() -> None:
    events = [
        cpu("block.fc", 0, 10),
        cpu("aten::linear", 1, 9, seq=4),
        cpu("aten::t", 2, 3, seq=4),
        cpu("aten::addmm", 4, 8, seq=5),
        cpu("act", 10, 15),
        cpu("aten::relu", 11, 14, seq=6),
        cpu(BACKWARD_PREFIX + "ReluBackward0", 20, 30, seq=6, fwd=1),
        cpu("aten::threshold_backward", 21, 29),
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 30, 50, seq=5, fwd=1),
        cpu("aten::mm", 31, 45),
        cpu(BACKWARD_PREFIX + "torch::autograd::AccumulateGrad", 50, 54),
        cpu(BACKWARD_PREFIX + "TBackward0", 60, 62, seq=4, fwd=1),
        cpu(BACKWARD_PREFIX + "SumBackward0", 62, 70, seq=9, fwd=1),  # the loss: no layer
    ]
    measure = attribute(events, NAMES, backward=True).measure
    fc, act = measure.paths["block.fc"], measure.paths["act"]
    assert act.backward_self_cpu_us == 10
    assert fc.backward_self_cpu_us == 20 + 4 + 2  # AddmmBackward0, its AccumulateGrad, TBackward0
    assert fc.ops["aten::mm [bwd]"].backward and fc.ops["aten::mm [bwd]"].self_cpu_us == 14
    assert "aten::threshold_backward [bwd]" in act.ops
    assert fc.self_cpu_us == 10 and fc.calls == 1  # forward numbers untouched by backward


def test_backward_totals_include_nested_layers() -> None:
    events = [
        cpu("block", 0, 20),
        cpu("aten::flatten", 1, 3, seq=1),
        cpu("block.fc", 5, 15),
        cpu("aten::addmm", 6, 14, seq=2),
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 30, 40, seq=2, fwd=1),
        cpu(BACKWARD_PREFIX + "ViewBackward0", 40, 43, seq=1, fwd=1),
    ]
    measure = attribute(events, NAMES, backward=True).measure
    block, fc = measure.paths["block"], measure.paths["block.fc"]
    assert (fc.backward_self_cpu_us, fc.backward_total_cpu_us) == (10, 10)
    assert (block.backward_self_cpu_us, block.backward_total_cpu_us) == (3, 13)


def test_backward_is_ignored_unless_asked() -> None:
    events = [
        cpu("act", 0, 5),
        cpu("aten::relu", 1, 4, seq=1),
        cpu(BACKWARD_PREFIX + "ReluBackward0", 10, 20, seq=1, fwd=1),
    ]
    act = attribute(events, NAMES, backward=False).measure.paths["act"]
    assert act.backward_self_cpu_us == 0 and not any(op.backward for op in act.ops.values())


def test_memory_instants_go_to_the_innermost_open_event() -> None:
    def mem(at: int, nbytes: int, on_device: bool = False) -> Event:
        return Event(
            "mem", MEMORY_EVENT, at * 1000, at * 1000, 1, nbytes=nbytes, on_device=on_device
        )

    events = [
        cpu("block", 0, 50),
        cpu("aten::empty", 1, 4),
        mem(2, 400),
        cpu("block.fc", 10, 40),
        cpu("aten::addmm", 11, 39),
        mem(12, 1000),
        mem(13, 64, on_device=True),
        mem(45, -400),
    ]
    measure = attribute(events, NAMES).measure
    block, fc = measure.paths["block"], measure.paths["block.fc"]
    assert (fc.cpu_mem, fc.self_cpu_mem, fc.device_mem) == (1000, 1000, 64)
    assert (block.cpu_mem, block.self_cpu_mem) == (1000, 0)  # +400 -400 in its own code
    assert block.self_device_mem == 0 and block.device_mem == 64
    assert fc.ops["aten::addmm"].self_cpu_mem == 1000 and block.ops["aten::empty"].cpu_mem == 400


def test_device_kernels_follow_their_launching_op() -> None:
    events = [
        cpu("block", 0, 50),
        cpu("block.fc", 10, 40),
        cpu("aten::addmm", 11, 39, corr=7),
        Event("device", "gemm_kernel", 100_000, 125_000, 99, linked_id=7),
        Event("device", "block.fc", 100_000, 130_000, 99, linked_id=0),  # device copy of the range
    ]
    measure = attribute(events, NAMES).measure
    fc, block = measure.paths["block.fc"], measure.paths["block"]
    assert (fc.self_device_us, fc.total_device_us) == (25, 25)
    assert (block.self_device_us, block.total_device_us) == (0, 25)
    assert fc.ops["aten::addmm"].self_device_us == 25


def test_layer_frames_are_kept_per_call_only_when_asked() -> None:
    events = [
        cpu("act", 0, 10),
        cpu("aten::relu", 1, 9),
        cpu("aten::clamp_min", 2, 8),
        cpu("act", 20, 26),
        cpu("aten::relu", 21, 25),
    ]
    assert attribute(events, NAMES).raw_calls == {}
    calls = attribute(events, NAMES, keep_raw=True).raw_calls["act"]
    assert (
        len(calls) == 2
    )  # the event lists are built from these (tests/unit/runtime/events/test_event_lists.py)


def test_a_nested_op_of_the_same_name_is_one_call_as_torch_counts_it() -> None:
    # Dropout: aten::div_ (Scalar) runs aten::div_ (Tensor) as its only child; torch's event tree
    # drops the inner one and lifts its children, so the op is one call whose self time is both.
    events = [
        cpu("act", 0, 100),
        cpu("aten::dropout", 1, 90),
        cpu("aten::div_", 10, 50),
        cpu("aten::div_", 11, 49),
        cpu("aten::to", 12, 48),
    ]
    ops = attribute(events, NAMES).measure.paths["act"].ops
    assert ops["aten::div_"].calls == 1
    assert (ops["aten::div_"].total_cpu_us, ops["aten::div_"].self_cpu_us) == (40, 4)
    assert (ops["aten::to"].calls, ops["aten::dropout"].self_cpu_us) == (1, 49)
    assert sum(op.self_cpu_us for op in ops.values()) == 89  # self times still add up


def test_same_name_ops_stay_two_calls_unless_the_inner_is_the_only_child() -> None:
    events = [
        cpu("act", 0, 100),
        cpu("aten::div_", 10, 50),
        cpu("aten::div_", 11, 20),
        cpu("aten::mul", 21, 30),
        cpu("aten::add", 60, 90),  # a chain of three: all one call
        cpu("aten::add", 61, 89),
        cpu("aten::add", 62, 88),
    ]
    ops = attribute(events, NAMES).measure.paths["act"].ops
    assert ops["aten::div_"].calls == 2 and ops["aten::div_"].total_cpu_us == 49
    assert ops["aten::add"].calls == 1 and ops["aten::add"].total_cpu_us == 30
    assert ops["aten::add"].self_cpu_us == 30


def test_a_merged_op_gives_its_memory_to_the_op_it_is_merged_into() -> None:
    events = [
        cpu("act", 0, 100),
        cpu("aten::div_", 10, 50),
        cpu("aten::div_", 11, 49),
        Event("mem", MEMORY_EVENT, 12_000, 12_000, 1, nbytes=64),
    ]
    div = attribute(events, NAMES).measure.paths["act"].ops["aten::div_"]
    assert (div.calls, div.self_cpu_mem, div.cpu_mem) == (1, 64, 64)


def test_a_nested_backward_op_of_the_same_name_is_one_call() -> None:
    events = [
        cpu("act", 0, 10),
        cpu("aten::mul", 1, 9, seq=3),
        cpu(BACKWARD_PREFIX + "MulBackward0", 20, 40, seq=3, fwd=1),
        cpu("aten::mul", 21, 39),
        cpu("aten::mul", 22, 38),
        cpu("aten::empty", 23, 25),
    ]
    ops = attribute(events, NAMES, backward=True).measure.paths["act"].ops
    bwd = ops["aten::mul [bwd]"]
    assert (bwd.calls, bwd.total_cpu_us, bwd.self_cpu_us) == (1, 18, 16)


def test_time_in_no_layer_is_outside_and_everything_adds_up() -> None:
    events = [
        cpu("aten::zeros", 0, 4),  # the user's code before the model
        cpu(ROOT_RANGE, 5, 45),
        cpu("aten::add", 6, 10),
        cpu("act", 10, 30),
        cpu("aten::relu", 11, 29, seq=6),
        cpu("aten::mean", 50, 58, seq=7),  # the loss
        cpu("aten::sum", 52, 55, seq=7),
        cpu(BACKWARD_PREFIX + "MeanBackward0", 60, 66, seq=7, fwd=1),  # the loss's node
        cpu("aten::div", 61, 64),
        cpu(BACKWARD_PREFIX + "ReluBackward0", 70, 80, seq=6, fwd=1),
        cpu(BACKWARD_PREFIX + "torch::autograd::AccumulateGrad", 80, 82),  # no seq: previous
    ]
    measure = attribute(events, NAMES, backward=True).measure
    root, act = measure.paths[""], measure.paths["act"]
    assert measure.outside_cpu_us == 4 + 8 + 6
    inside = sum(p.self_cpu_us + p.backward_self_cpu_us for p in measure.paths.values())
    assert inside == 20 + 20 + 12 and inside + measure.outside_cpu_us == measure.total_cpu_us
    assert (root.self_cpu_us, act.backward_self_cpu_us) == (20, 12)


def test_outside_time_excludes_layers_run_inside_an_outside_event() -> None:
    # The user's own record_function around the model: only its own time is outside.
    events = [cpu("step", 0, 50), cpu(ROOT_RANGE, 10, 40), cpu("aten::mm", 12, 38)]
    measure = attribute(events, NAMES).measure
    assert measure.outside_cpu_us == 20 and measure.paths[""].self_cpu_us == 30


def test_attribution_leaves_no_cyclic_garbage() -> None:
    import gc

    events = [
        cpu(ROOT_RANGE, 0, 100),
        cpu("block", 10, 60),
        cpu("block.fc", 20, 50),
        cpu("aten::addmm", 25, 45),
    ]
    gc.collect()
    gc.disable()
    try:
        result = attribute(events, NAMES)  # kept frames (Profile.raw()) are a tree: see Profile
        assert result.measure.paths["block.fc"].ops["aten::addmm"].calls == 1
        del result
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_the_losss_ops_and_their_kernels_are_the_outside_rows() -> None:
    """The loss runs in no layer: its forward op and its backward node (and the op in it) are
    outside ops, backward apart, each with the device time of the kernels it launched."""
    events = [
        cpu("block.fc", 0, 10),
        cpu("aten::addmm", 1, 9, seq=5),
        cpu("aten::mse_loss", 12, 18, seq=9, corr=3),
        cpu(BACKWARD_PREFIX + "MseLossBackward0", 20, 30, seq=9, fwd=1),
        cpu("aten::mse_loss_backward", 21, 29, corr=4),
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 30, 50, seq=5, fwd=1),
        Event("device", "loss_kernel", 40_000, 46_000, 99, linked_id=3),
        Event("device", "loss_bwd_kernel", 50_000, 52_000, 99, linked_id=4),
    ]
    measure = attribute(events, NAMES, backward=True).measure
    ops = measure.outside_ops
    assert set(ops) == {
        "aten::mse_loss",
        BACKWARD_PREFIX + "MseLossBackward0 [bwd]",
        "aten::mse_loss_backward [bwd]",
    }
    assert not ops["aten::mse_loss"].backward and ops["aten::mse_loss_backward [bwd]"].backward
    assert ops["aten::mse_loss"].self_device_us == 6
    assert ops["aten::mse_loss_backward [bwd]"].self_device_us == 2
    assert measure.outside_cpu_us == 6 + 2 + 8 == sum(o.self_cpu_us for o in ops.values())
    assert "aten::mse_loss" not in measure.paths["block.fc"].ops
