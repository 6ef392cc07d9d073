from __future__ import annotations

from hybridprof.runtime.events.fsdp_names import fsdp_comm
from hybridprof.runtime.events.training_names import RangeNames


def test_the_communication_ranges_name_their_kind_and_unit() -> None:
    assert fsdp_comm("FSDP::all_gather (layers.0)") == ("all_gather", "layers.0")
    assert fsdp_comm("FSDP::all_gather_copy_out (a.b.c)") == ("copy_out", "a.b.c")
    assert fsdp_comm("FSDP::post_backward_reduce (blocks.3)") == ("reduce_scatter", "blocks.3")
    assert fsdp_comm("FSDP::all_gather") == ("all_gather", "")  # the root unit
    assert fsdp_comm("FSDP::post_backward_reduce") == ("reduce_scatter", "")


def test_other_ranges_are_no_communication() -> None:
    for name in (
        "FSDP::pre_forward (layers.0)",
        "FSDP::backward_prefetch for layers.1",  # the gather inside it names its unit
        "FSDP::post_backward_rs_wait (layers.1)",
        "FSDP::post_backward_reshard (layers.0)",
        "FSDP::all_gather layers.0",
        "aten::all_gather",
        "all_gather (layers.0)",
    ):
        assert fsdp_comm(name) is None, name


def test_the_walk_looks_them_up_once_and_a_layer_keeps_its_name() -> None:
    names = RangeNames({"FSDP::all_gather (x)": "x"})  # a layer's range named so wins
    assert names["FSDP::all_gather (x)"] == "x"
    assert names["FSDP::all_gather (y)"] == ("comm", "all_gather", "y")
    assert names["aten::mm"] is None
