"""torch EventLists built from hand-made attributed events (no profiler), as torchprof code reads
them."""

from __future__ import annotations

import pytest
from torch.autograd.profiler_util import EventList, FunctionEvent

from hybridprof.runtime.events.attribution import attribute
from hybridprof.runtime.events.event_lists import (
    NESTED_KERNELS,
    ListOptions,
    RawEvent,
    from_frames,
    from_timer,
)
from hybridprof.runtime.events.kineto import MEMORY_EVENT, Event

NAMES = {"block": "block", "block.fc": "block.fc", "act": "act"}


def cpu(name: str, start: int, end: int) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, 1)


def lists(events: list[Event], memory: bool = False) -> dict[str, list[EventList]]:
    result = attribute(events, NAMES, keep_raw=True)
    return from_frames(result.raw_calls, result.kernels, ListOptions(None, memory))


def test_each_call_is_a_torch_event_list_of_function_events() -> None:
    events = [
        cpu("act", 0, 10),
        cpu("aten::relu", 1, 9),
        cpu("aten::clamp_min", 2, 8),
        cpu("act", 20, 26),
        cpu("aten::relu", 21, 25),
    ]
    calls = lists(events)["act"]
    assert [[e.name for e in call] for call in calls] == [
        ["aten::relu", "aten::clamp_min"],
        ["aten::relu"],
    ]
    first = calls[0]
    assert isinstance(first, EventList) and all(isinstance(e, FunctionEvent) for e in first)
    relu, clamp = first
    assert (relu.cpu_time_total, relu.self_cpu_time_total) == (8, 2)
    assert (relu.key, relu.count, relu.cpu_children, clamp.cpu_parent) == (
        "aten::relu",
        1,
        [clamp],
        relu,
    )
    assert relu.cpu_parent is None  # the layer range is not an event, as under torchprof
    assert first.self_cpu_time_total == 8
    assert first.total_average().cpu_time_total == 14
    averages = {a.key: a for a in first.key_averages()}
    assert averages["aten::clamp_min"].self_cpu_time_total == 6
    table = first.table(sort_by="self_cpu_time_total")
    assert table.index("aten::clamp_min") < table.index("aten::relu")
    assert "Self CPU time total: 8.000us" in str(first)


def test_a_parent_call_holds_the_ops_of_the_selected_calls_inside_it() -> None:
    events = [
        cpu("block", 0, 60),
        cpu("aten::view", 2, 5),
        cpu("block.fc", 10, 50),
        cpu("aten::linear", 11, 49),
        cpu("aten::addmm", 12, 48),
    ]
    result = lists(events)
    assert [e.name for e in result["block.fc"][0]] == ["aten::linear", "aten::addmm"]
    assert [e.name for e in result["block"][0]] == ["aten::view", "aten::linear", "aten::addmm"]
    assert result["block.fc"][0][0] is result["block"][0][1]  # one event, seen by both calls
    assert list(result) == ["block.fc", "block"]  # in the order the calls ended, as torchprof


def test_a_merged_same_name_op_is_one_event_with_its_childrens_children() -> None:
    events = [
        cpu("act", 0, 100),
        cpu("aten::dropout", 1, 90),
        cpu("aten::div_", 10, 50),
        cpu("aten::div_", 11, 49),
        cpu("aten::to", 12, 48),
    ]
    call = lists(events)["act"][0]
    assert [e.name for e in call] == ["aten::dropout", "aten::div_", "aten::to"]
    div, to = call[1], call[2]
    assert to.cpu_parent is div and div.cpu_children == [to]
    assert (div.cpu_time_total, div.self_cpu_time_total) == (40, 4)
    assert {a.key: a.count for a in call.key_averages()}["aten::div_"] == 1


def test_memory_is_inclusive_and_self_memory_excludes_children() -> None:
    events = [
        cpu("act", 0, 100),
        cpu("aten::linear", 1, 90),
        Event("mem", MEMORY_EVENT, 2000, 2000, 1, nbytes=16),
        cpu("aten::addmm", 10, 50),
        Event("mem", MEMORY_EVENT, 20_000, 20_000, 1, nbytes=64),
    ]
    linear, addmm = lists(events, memory=True)["act"][0]
    assert (linear.cpu_memory_usage, linear.self_cpu_memory_usage) == (80, 16)
    assert (addmm.cpu_memory_usage, addmm.self_cpu_memory_usage) == (64, 64)


def test_timer_calls_are_one_event_each_with_nested_calls_as_children() -> None:
    raw = {
        "block": [[RawEvent("block", 0.0, 50.0, 30.0)]],
        "block.fc": [[RawEvent("block.fc", 10.0, 30.0, 20.0)]],
    }
    result = from_timer(raw)
    (fc,) = result["block.fc"][0]
    block, nested = result["block"][0]
    assert nested is fc and fc.cpu_parent is block
    assert (block.cpu_time_total, block.self_cpu_time_total) == (50, 30)
    assert [a.key for a in result["block"][0].key_averages()] == ["block", "block.fc"]


def test_an_empty_attribution_gives_no_lists() -> None:
    assert lists([cpu("aten::add", 0, 1)]) == {}
    assert from_timer({}) == {}


@pytest.mark.parametrize("memory", [False, True])
def test_lists_say_whether_memory_was_profiled(memory: bool) -> None:
    call = lists([cpu("act", 0, 10), cpu("aten::relu", 1, 9)], memory=memory)["act"][0]
    assert ("CPU Mem" in call.table()) is memory


def test_kernels_sit_under_their_launching_op_and_lift_with_a_merge() -> None:
    events = [
        cpu("act", 0, 100),
        Event("cpu", "aten::div_", 10_000, 50_000, 1, correlation_id=7),
        Event("cpu", "aten::div_", 11_000, 49_000, 1, correlation_id=8),  # merged into the outer
        Event("cpu", "aten::mul", 60_000, 70_000, 1, correlation_id=9),
        Event("device", "div_kernel", 12_000, 17_000, -1, linked_id=8),
        Event("device", "mul_kernel", 61_000, 63_000, -1, linked_id=9),
    ]
    result = attribute(events, NAMES, keep_raw=True)
    div, mul = from_frames(result.raw_calls, result.kernels, ListOptions("cuda"))["act"][0]
    assert [k.name for k in div.kernels] == ["div_kernel"] and div.device_time_total == 5
    assert [k.name for k in mul.kernels] == ["mul_kernel"] and mul.self_device_time_total == 2


def test_device_time_is_inclusive_and_torch_tables_add_it_up() -> None:
    """torch's table() asserts when kernels sit on CPU events that are not marked legacy."""
    events = [
        cpu("act", 0, 100),
        Event("cpu", "aten::linear", 10_000, 50_000, 1, correlation_id=7),
        Event("cpu", "aten::addmm", 20_000, 40_000, 1, correlation_id=8),
        Event("device", "gemm_kernel", 21_000, 26_000, -1, linked_id=8),
        Event("device", "bias_kernel", 27_000, 28_000, -1, linked_id=7),
    ]
    result = attribute(events, NAMES, keep_raw=True)
    (call,) = from_frames(result.raw_calls, result.kernels, ListOptions("cuda"))["act"]
    linear = next(e for e in call if e.name == "aten::linear")
    addmm = next(e for e in call if e.name == "aten::addmm")
    assert linear.device_time_total == 6 and linear.self_device_time_total == 1
    assert addmm.device_time_total == 5 and addmm.self_device_time_total == 5
    assert [k.name for k in linear.kernels] == ["bias_kernel", NESTED_KERNELS]
    assert call.total_average().self_device_time_total == 6
    assert "CUDA total" in call.table(sort_by="self_cpu_time_total")
