"""What code written for torchprof reads from a Profile, on real torch, for every strategy."""

from __future__ import annotations

import warnings
from collections import defaultdict

import pytest
import torch
from torch import nn
from torch.autograd.profiler_util import EventList, FunctionEvent

import hybridprof
import hybridprof.torchprof as torchprof
from hybridprof.errors import SelectionError
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.strategies import STRATEGIES


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.fc(x)))


class Net(nn.Module):
    """A shared block (two paths, one module) and a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.block = Block()
        self.again = self.block
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.again(self.block(x)))


def inputs() -> torch.Tensor:
    return torch.rand(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.fixture(params=list(STRATEGIES))
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_raw_holds_torch_event_lists_for_the_profiled_paths_only(strategy: str) -> None:
    model = Net().eval()
    with hybridprof.Profile(model, strategy=strategy) as prof:
        for _ in range(3):
            prof(inputs())
    _traces, events = prof.raw()
    assert isinstance(events, defaultdict) and events.default_factory is list
    fc, head = ("Net", "block", "fc"), ("Net", "head")
    assert list(events) == [fc, ("Net", "block", "drop"), head]  # in the order the calls ended
    assert events[("Net", "block")] == [] and events[("Net", "nope")] == []  # as a defaultdict
    assert [len(events[fc]), len(events[head])] == [6, 3]  # one list per call
    for call in events[fc]:
        assert (
            isinstance(call, EventList) and call and all(isinstance(e, FunctionEvent) for e in call)
        )
        first = call[0]
        assert first.count == 1 and first.key == first.name and first.cpu_parent is None
        assert first.cpu_time_total >= first.self_cpu_time_total >= 0
        assert call.total_average().count == len(call)
        assert call.key_averages() and "Self CPU" in call.table(sort_by="self_cpu_time_total")
    assert prof.raw()[1] is events  # built once


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_event_lists_have_torchs_op_tree(strategy: str) -> None:
    model = Net().eval()
    with hybridprof.Profile(model, strategy=strategy, profile_memory=True) as prof:
        model(inputs())
    call = prof.raw()[1][("Net", "block", "fc")][0]
    linear = next(e for e in call if e.name == "aten::linear")
    assert linear.cpu_parent is None and linear.cpu_children
    assert all(child.cpu_parent is linear for child in linear.cpu_children)
    assert linear.self_cpu_time_total == pytest.approx(
        linear.cpu_time_total - sum(c.cpu_time_total for c in linear.cpu_children)
    )
    assert linear.cpu_memory_usage > 0  # its output, allocated inside it
    assert linear.input_shapes == []  # not recorded, as torch leaves them


def test_dropouts_nested_div_is_one_call_as_torch_counts_it() -> None:
    model = Net().train()
    counts = {}
    for strategy in ("session", "per-call"):
        with hybridprof.Profile(model, strategy=strategy) as prof:
            model(inputs())
        op = next(o for o in prof.session().record("block.drop").ops if o.name == "aten::div_")
        call = prof.raw()[1][("Net", "block", "drop")][0]
        counts[strategy] = (op.calls, [e.name for e in call].count("aten::div_"))
    # Two calls of the block: two aten::div_ (torch's inner one merged), one in each call's list.
    assert counts == {"session": (2, 1), "per-call": (2, 1)}


def test_traces_paths_exited_and_calling_the_profile(strategy: str) -> None:
    model = Net().eval()
    prof = hybridprof.Profile(model, strategy=strategy, paths=["head"])
    assert (prof.traces, prof.exited, prof.paths) == ((), False, ["head"])
    with prof:
        assert not prof.exited and len(prof.trace_profile_events) == 0
        out = prof(inputs())
    assert prof.exited and torch.equal(out, model(inputs()))
    paths = [t.path for t in prof.traces]
    assert paths == [t.path for t in torchprof.profile.walk_modules(model)]
    assert ("Net", "again") not in paths  # torchprof skipped a parent's repeated child
    assert prof.raw() == (prof.traces, prof.trace_profile_events)
    assert list(prof.trace_profile_events) == [("Net", "head")]


def test_outputs_are_bitwise_identical_with_and_without_profiling(strategy: str) -> None:
    model = Net().train()
    torch.manual_seed(1)
    expected = model(inputs())
    torch.manual_seed(1)
    with (
        torchprof.Profile(model)
        if strategy == "session"
        else hybridprof.Profile(model, strategy=strategy) as prof
    ):
        got = prof(inputs())
    assert torch.equal(expected, got)


def test_enabled_false_is_a_no_op() -> None:
    model = Net().eval()
    expected = model(inputs())
    with torchprof.Profile(model, enabled=False) as prof:
        assert live_patches() == ()
        got = prof(inputs())
    assert torch.equal(expected, got)
    assert (prof.exited, prof.traces, dict(prof.raw()[1])) == (False, (), {})
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_torchprof_mode_warns_about_an_unknown_path_and_ignores_it() -> None:
    model = Net()
    paths = [("Net", "hed"), ("Net", "block", "fc")]
    with pytest.warns(UserWarning, match=r"\('Net', 'hed'\).*did you mean \('Net', 'head'\)"):
        prof = torchprof.Profile(model, paths=paths)
    with prof:
        model(inputs())
    assert list(prof.raw()[1]) == [("Net", "block", "fc")]
    assert prof.paths == paths
    with pytest.raises(SelectionError, match="head"):
        hybridprof.Profile(model, paths=paths)  # hybridprof's own API keeps the error


def test_torchprof_mode_with_no_known_path_profiles_nothing() -> None:
    model = Net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = torchprof.Profile(model, paths=[("Other", "x")])
    with prof:
        model(inputs())
    assert dict(prof.raw()[1]) == {}
    with torchprof.Profile(model, paths=[]) as prof:  # torchprof: an empty list selects nothing
        model(inputs())
    assert dict(prof.raw()[1]) == {}


def test_traces_to_display_renders_raw_like_torchprof() -> None:
    model = Net().eval()
    with torchprof.Profile(model, profile_memory=True) as prof:
        model(inputs())
    traces, events = prof.raw()
    text = torchprof.display.traces_to_display(traces, events, profile_memory=True)
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].split("|")] == [
        "Module",
        "Self CPU total",
        "CPU total",
        "Self CPU Mem",
        "CPU Mem",
        "Number of Calls",
    ]
    assert lines[2].startswith("Net ") and lines[3].startswith("├── block")
    fc = next(line for line in lines if line.startswith("│├── fc"))
    assert fc.rstrip().endswith("| 2")  # the shared block ran twice
    with_events = torchprof.display.traces_to_display(traces, events, show_events=True)
    assert "aten::addmm" in with_events and "aten::linear" in with_events
    # A layer's CPU total counts its top-level ops once (not every nested op's inclusive time).
    calls = events[("Net", "head")]
    top = sum(e.cpu_time_total for c in calls for e in c if e.cpu_parent is None)
    head = next(line for line in lines if line.startswith("└── head"))
    assert head.split("|")[2].strip() == hybridprof_time(top)


def hybridprof_time(us: float) -> str:
    from hybridprof.reporting.format import format_time_us

    return format_time_us(us)


def test_public_names() -> None:
    assert hybridprof.Trace is torchprof.Trace
    assert torchprof.Profile.__init__.__code__.co_varnames[1:6] == (
        "model",
        "enabled",
        "use_cuda",
        "profile_memory",
        "paths",
    )
    trace = next(torchprof.profile.walk_modules(nn.Linear(2, 2)))
    assert trace == hybridprof.Trace(("Linear",), True, trace.module)
