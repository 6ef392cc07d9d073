"""hybridprof.Profile on real torch: torchprof's API and behaviour, over every strategy present."""

from __future__ import annotations

import copy
import gc
import warnings
import weakref
from dataclasses import replace

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.strategies import STRATEGIES
from hybridprof.runtime.strategies.session_strategy import StoppedIteration

STRATEGY_NAMES = list(STRATEGIES)
EVENT_STRATEGIES = ("session", "per-call")  # the ones that record ops


def small_input() -> torch.Tensor:
    return torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))


def alexnet() -> nn.Module:
    torch.manual_seed(0)
    return hybridprof.examples.alexnet(num_classes=10).eval()


class Looped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = self.step(x)
        return self.head(x)


class SharedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = self.first  # one module object, two paths

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


class Failing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ok = nn.Linear(4, 4)
        self.bad = nn.Linear(5, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bad(self.ok(x))


@pytest.fixture(params=STRATEGY_NAMES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_alexnet_leaves_one_call_each_with_expected_ops(strategy: str) -> None:
    model = alexnet()
    with hybridprof.Profile(model, strategy=strategy) as prof:
        model(small_input())
    session = prof.session()
    leaves = [t.path for t in session.plan.targets if t.is_leaf]
    assert [r.path for r in session.records] == leaves
    assert all(r.calls == 1 for r in session.records)
    if strategy in EVENT_STRATEGIES:
        ops = {r.path: {op.name for op in r.ops} for r in session.records}
        assert any("conv" in name for name in ops["features.0"])
        assert ops["classifier.1"] & {"aten::addmm", "aten::linear", "aten::matmul", "aten::mm"}
        for record in session.records:
            assert 0 <= record.self_cpu_us.median <= record.total_cpu_us.median + 1e-6


def test_looped_module_counts_three_calls(strategy: str) -> None:
    model = Looped()
    with hybridprof.Profile(model, strategy=strategy) as prof:
        model(torch.ones(2, 4))
    session = prof.session()
    assert session.record("step").calls == 3
    assert session.record("head").calls == 1


def test_shared_module_counted_once_at_canonical_path(strategy: str) -> None:
    model = SharedBlock()
    with hybridprof.Profile(model, strategy=strategy) as prof:
        model(torch.ones(1, 4))
    records = prof.session().records
    assert [(r.path, r.calls, r.aliases) for r in records] == [("first", 2, ("second",))]


def test_nested_selection_parent_includes_child(strategy: str) -> None:
    model = alexnet()
    paths = [("AlexNet", "features"), ("AlexNet", "features", "0"), "features.3"]
    with hybridprof.Profile(model, paths=paths, strategy=strategy) as prof:
        model(small_input())
    session = prof.session()
    parent, c0, c3 = (session.record(p) for p in ("features", "features.0", "features.3"))
    assert parent is not None and c0 is not None and c3 is not None
    children = c0.total_cpu_us.median + c3.total_cpu_us.median
    assert parent.total_cpu_us.median >= children
    assert parent.self_cpu_us.median <= parent.total_cpu_us.median - children + 1e-3
    if strategy == "per-call":  # exact by construction: self = total - nested selected totals
        assert parent.self_cpu_us.median == pytest.approx(parent.total_cpu_us.median - children)


def test_forward_that_raises_propagates_unchanged_and_restores(strategy: str) -> None:
    model = Failing()
    prof = hybridprof.Profile(model, strategy=strategy)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied") as info, prof:
        model(torch.ones(1, 4))
    assert type(info.value) is RuntimeError
    assert prof.failed_path == "bad"
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_reentry_raises(strategy: str) -> None:
    model = Looped()
    prof = hybridprof.Profile(model, strategy=strategy)
    with prof, pytest.raises(RuntimeError, match="already entered"), prof:
        pass
    with pytest.raises(RuntimeError, match="already entered"), prof:
        pass


def test_a_second_profile_cannot_start_inside_another(strategy: str) -> None:
    model = Looped()
    x = torch.rand(2, 4)
    with hybridprof.Profile(model, strategy=strategy) as outer:
        inner = hybridprof.Profile(model, strategy=strategy)
        with pytest.raises(RuntimeError, match="another hybridprof profile is active"), inner:
            pass
        model(x)
    # the outer profile was not disturbed by the refused inner one
    assert outer.session().records and all(r.calls > 0 for r in outer.session().records)
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_enabled_false_patches_nothing() -> None:
    model = Looped()
    with hybridprof.Profile(model, enabled=False) as prof:
        assert live_patches() == ()
        model(torch.ones(1, 4))
    assert "nothing profiled" in str(prof)
    with pytest.raises(RuntimeError, match="nothing was profiled"):
        prof.session()


def test_outputs_bitwise_identical(strategy: str) -> None:
    model, x = alexnet(), small_input()
    expected = model(x)
    with hybridprof.Profile(model, strategy=strategy, profile_memory=True):
        got = model(x)
    assert torch.equal(expected, got)


def test_deepcopy_while_profiled_uses_the_copy(strategy: str) -> None:
    model = Looped()
    with hybridprof.Profile(model, strategy=strategy):
        clone = copy.deepcopy(model)
    with torch.no_grad():
        clone.head.weight.zero_()
        clone.head.bias.zero_()
    assert torch.equal(clone(torch.ones(1, 4)), torch.zeros(1, 2))
    assert not torch.equal(model(torch.ones(1, 4)), torch.zeros(1, 2))


def test_own_instance_forward_and_hooks(strategy: str) -> None:
    model = Looped()
    seen: list[str] = []
    model.head.register_forward_hook(lambda m, a, o: seen.append("hook"))
    original_head = model.head.forward

    def doubled(x: torch.Tensor) -> torch.Tensor:
        return original_head(x) * 2

    model.head.forward = doubled  # type: ignore[method-assign,assignment]
    with hybridprof.Profile(model, strategy=strategy) as prof:
        out = model(torch.ones(1, 4))
    assert model.head.__dict__["forward"] is doubled
    assert seen == ["hook"] and prof.session().record("head").calls == 1
    assert torch.equal(out, model(torch.ones(1, 4)))


def test_raw_keeps_torchprof_shapes() -> None:
    model = alexnet()
    with hybridprof.Profile(model, strategy="per-call") as prof:
        model(small_input())
    traces, events = prof.raw()
    assert traces[0].path == ("AlexNet",) and not traces[0].leaf and traces[0].module is model
    conv = next(t for t in traces if t.path == ("AlexNet", "features", "0"))
    assert conv.leaf and conv.module is model.features[0]
    assert len(events[("AlexNet", "features", "0")]) == 1
    names = {e.name for e in events[("AlexNet", "features", "0")][0]}
    assert "aten::conv2d" in names


def test_display_and_no_warnings_with_memory(strategy: str) -> None:
    model = alexnet()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with hybridprof.Profile(model, profile_memory=True, strategy=strategy) as prof:
            model(small_input())
        text = prof.display(show_events=True)
    assert text == prof.display(show_events=True) and str(prof) == prof.display()
    assert "CPU Mem" in text and "AlexNet" in text and "CUDA" not in text
    if strategy in EVENT_STRATEGIES:
        assert "aten::" in text and "aten::" not in str(prof)


def test_session_round_trips_json() -> None:
    model = Looped()
    with hybridprof.Profile(model, strategy="per-call") as prof:
        model(torch.ones(1, 4))
    session = prof.session()
    assert prof.session() is session
    assert ProfileSession.from_json(session.to_json()) == session
    assert session.environment.torch_version == torch.__version__


def test_unknown_path_is_a_value_error_naming_close_matches() -> None:
    with pytest.raises(ValueError, match=r"features\.0"):
        hybridprof.Profile(alexnet(), paths=[("AlexNet", "featurs", "0")])


def test_use_cuda_without_cuda_is_refused() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    model = Looped()
    prof = hybridprof.Profile(model, use_cuda=True)
    with pytest.raises(hybridprof.HybridprofError, match="CUDA is not available"), prof:
        pass
    assert live_patches() == ()


def test_to_dataframe_has_one_row_per_profiled_path() -> None:
    model = Looped()
    with hybridprof.Profile(model, strategy="per-call") as prof:
        model(torch.ones(1, 4))
    frame = prof.to_dataframe()
    assert list(frame["path"]) == ["step", "head", "(outside profiled modules)"]
    assert list(frame["calls"]) == [3, 1, 0]


class Nested(nn.Module):
    """A selected parent around selected children, a looped child and an inline op."""

    def __init__(self) -> None:
        super().__init__()
        self.body = Looped()
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) * 2)


def test_torchs_events_are_freed_with_the_profile_not_while_it_is_read() -> None:
    """Freeing torch's events takes as long as reading them: a Profile keeps them until it is
    dropped, as a torch profiler does, so `str(prof)` and `session()` do not pay for it."""
    model = Nested()
    with torch.no_grad(), hybridprof.Profile(model) as prof:
        model(torch.ones(8, 4))
    assert prof._block is not None and isinstance(prof._block.result, StoppedIteration)
    events = weakref.ref(prof._block.result.profiler)
    str(prof)
    session = prof.session()
    assert prof._block.result.profiler is None  # read: nothing reads the events again
    assert events() is not None
    del prof
    gc.collect()
    assert events() is None
    assert session.records


def test_first_table_from_layer_ranges_matches_the_full_session() -> None:
    """`str(prof)` is worked out from the layer ranges alone and leaves the ops unread; the
    table it gives is the one the fully attributed session gives, number for number, raw (no
    ops were read to count the events the compensation takes out), and stays the same table
    once the session is compensated: torchprof's table is the figures as measured."""
    from hybridprof.reporting.text.text_table import render_text

    model = Nested()
    paths = ["", "body", "body.step", "body.head", "act"]
    with torch.no_grad(), hybridprof.Profile(model, paths=paths) as prof:
        for _ in range(2):
            model(torch.ones(8, 4))
    first = str(prof)
    assert prof._block is not None
    stopped = prof._block.result
    assert isinstance(stopped, StoppedIteration) and stopped.profiler is not None  # ops not read
    full = prof.session()  # the full pass
    assert stopped.profiler is None
    assert full.calibration is not None
    raw = replace(full, calibration=None)
    assert first == render_text(raw, outside_row=False)
    assert str(prof) == first  # the same table after the full pass
    assert render_text(full, outside_row=False) != first  # the session's views are compensated
    assert full.record("body.step").calls == 6
    assert "aten::mul" in prof.display(show_events=True)


@pytest.mark.parametrize("reader", ["raw", "events", "dataframe"])
def test_ops_are_attributed_when_first_needed(reader: str) -> None:
    model = Looped()
    with hybridprof.Profile(model) as prof:
        model(torch.ones(1, 4))
    if reader == "raw":
        names = {e.name for e in prof.raw()[1][("Looped", "step")][2]}
        assert "aten::linear" in names
    elif reader == "events":
        assert "aten::linear" in prof.display(show_events=True)
    else:
        assert list(prof.to_dataframe()["calls"]) == [3, 1, 0]  # the last: outside the layers
    assert any(op.name == "aten::linear" for op in prof.session().records[0].ops)
