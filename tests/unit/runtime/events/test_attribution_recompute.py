"""Attribution of a checkpointed segment's forward recomputed inside a backward node (hand-made)."""

from __future__ import annotations

from hybridprof.runtime.events.attribution import BACKWARD_PREFIX, ROOT_RANGE, attribute
from hybridprof.runtime.events.kineto import Event

NAMES = {ROOT_RANGE: "", "block": "block", "block.fc": "block.fc", "block.act": "block.act"}


def cpu(name: str, start: int, end: int, *, seq: int = -1, fwd: int = 0) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, 1, seq, fwd, 0)


def checkpointed_step() -> list[Event]:
    """root > block (checkpointed) > fc, act; backward of act recomputes block, then fc's node."""
    return [
        cpu(ROOT_RANGE, 0, 40),
        cpu("block", 5, 30),
        cpu("block.fc", 6, 20),
        cpu("aten::addmm", 7, 19, seq=1),
        cpu("block.act", 21, 29),
        cpu("aten::relu", 22, 28, seq=2),
        cpu(BACKWARD_PREFIX + "ReluBackward0", 100, 160, seq=2, fwd=1),
        cpu("ReluBackward0", 101, 159),
        cpu("block", 105, 140),  # the recomputed forward, opened inside ReLU's backward node
        cpu("block.fc", 106, 125),
        cpu("aten::addmm", 107, 124, seq=3),
        cpu("block.act", 128, 138),
        cpu("aten::relu", 129, 137, seq=4),
        cpu("aten::threshold_backward", 150, 158),
        cpu(BACKWARD_PREFIX + "AddmmBackward0", 160, 180, seq=1, fwd=1),
        cpu("aten::mm", 161, 179),
    ]


def test_recomputed_ranges_add_no_forward_calls_or_time() -> None:
    paths = attribute(checkpointed_step(), NAMES, backward=True).measure.paths
    assert {p: m.calls for p, m in paths.items()} == {
        "": 1,
        "block": 1,
        "block.fc": 1,
        "block.act": 1,
    }
    assert (paths["block.fc"].self_cpu_us, paths["block.act"].total_cpu_us) == (14, 8)
    assert (paths["block"].total_cpu_us, paths["block"].self_cpu_us) == (25, 3)


def test_each_layer_owns_its_recompute_as_backward() -> None:
    paths = attribute(checkpointed_step(), NAMES, backward=True).measure.paths
    fc, act, block = paths["block.fc"], paths["block.act"], paths["block"]
    assert fc.ops["aten::addmm [bwd]"].backward and fc.ops["aten::addmm [bwd]"].self_cpu_us == 17
    assert fc.backward_self_cpu_us == 19 + 20  # its recompute, then its own AddmmBackward0 node
    assert "aten::relu [bwd]" in act.ops and "aten::addmm [bwd]" not in act.ops
    # ReLU's node less the recompute (35) and the checkpoint's bookkeeping around it (58 - 35 - 8)
    assert act.backward_self_cpu_us == 10 + (60 - 35 - 15)
    assert block.backward_self_cpu_us == 35 - 19 - 10
    assert block.backward_total_cpu_us == (60 - 35 - 15) + 35 + 20


def test_checkpoint_bookkeeping_goes_to_the_layer_that_called_checkpoint() -> None:
    root = attribute(checkpointed_step(), NAMES, backward=True).measure.paths[""]
    assert (
        root.backward_self_cpu_us == 58 - 35 - 8
    )  # ReluBackward0's self time around the recompute
    assert root.ops["ReluBackward0 [bwd]"].backward
    assert root.backward_total_cpu_us == 60 + 20  # every backward node of the step


def test_without_the_caller_selected_no_layer_owns_the_bookkeeping() -> None:
    names = {name: path for name, path in NAMES.items() if path}
    measure = attribute(checkpointed_step()[1:], names, backward=True).measure
    owned = sum(m.self_cpu_us + m.backward_self_cpu_us for m in measure.paths.values())
    assert owned == measure.total_cpu_us - 15
    assert measure.paths["block.act"].backward_self_cpu_us == 10 + (60 - 35 - 15)


def test_self_times_forward_and_backward_cover_the_step_once() -> None:
    measure = attribute(checkpointed_step(), NAMES, backward=True).measure
    owned = sum(m.self_cpu_us + m.backward_self_cpu_us for m in measure.paths.values())
    assert owned == measure.total_cpu_us == 40 + 60 + 20
