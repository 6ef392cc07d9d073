from __future__ import annotations

from hybridprof.runtime.events.fsdp_names import fsdp_comm, fsdp_unit
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
    assert names["FSDP::pre_backward (y)"] == ("fsdp", "y", True)
    assert names["aten::mm"] is None


def test_every_range_for_a_unit_names_it_and_says_if_it_is_backward_work() -> None:
    assert fsdp_unit("FSDP::pre_forward (layers.0)") == ("layers.0", False)
    assert fsdp_unit("FSDP::post_forward") == ("", False)  # the root
    assert fsdp_unit("FSDP::root_pre_forward") == ("", False)
    assert fsdp_unit("FSDP::forward_prefetch for layers.2") == ("layers.2", False)
    assert fsdp_unit("FSDP::backward_prefetch for layers.1") == ("layers.1", True)
    assert fsdp_unit("FSDP::pre_backward (layers.1)") == ("layers.1", True)
    assert fsdp_unit("FSDP::post_backward_rs_wait ()") == ("", True)  # the root, so named
    assert fsdp_unit("FSDP::root_post_backward_callback") == ("", True)
    assert fsdp_unit("FSDP::all_gather (a) [pg=2]") == ("a", False)  # several parameter groups
    assert fsdp_comm("FSDP::post_backward_reduce (a) [pg=2]") == ("reduce_scatter", "a")
    for name in (
        "FSDP::cast_forward_inputs",  # names no unit
        "FSDP::inputs_to_device",
        "FSDP::root_pre_forward (x)",
        "FSDP::pre_forward layers.0",
        "fsdp::all_gather_copy_in",
        "aten::mm",
    ):
        assert fsdp_unit(name) is None, name
