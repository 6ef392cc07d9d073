"""The session strategy on real CPU torch: structure, nesting, sharing, backward, memory, trace."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.planner.compat import probe
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.strategies.base import StrategyConfig
from hybridprof.runtime.strategies.session_strategy import SessionStrategy


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU()


class Net(nn.Module):
    """A block (parent + children), a shared activation used twice, an inline op in the root."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.shared = nn.Tanh()
        self.head = nn.Linear(8, 2)


PATHS = ("", "block", "block.fc", "block.act", "shared", "head")


def run_iteration(
    strategy: SessionStrategy,
    net: Net,
    x: torch.Tensor,
    *,
    backward: bool = False,
    warmup: bool = False,
) -> IterationMeasure:
    run_forward(strategy, net, x, backward=backward)
    return strategy.end_iteration(warmup)


def run_forward(
    strategy: SessionStrategy, net: Net, x: torch.Tensor, *, backward: bool = False
) -> None:
    """A hand-written forward calling each layer through the strategy, as the patcher would."""
    call = strategy.call

    def block_forward(h: torch.Tensor) -> Any:
        h = call("block.fc", net.block.fc.forward, (h,), {})
        return call("block.act", net.block.act.forward, (h,), {})

    def root_forward(h: torch.Tensor) -> Any:
        h = call("block", block_forward, (h,), {})
        h = call("shared", net.shared.forward, (h,), {})
        h = call("shared", net.shared.forward, (h * 2,), {})
        return call("head", net.head.forward, (h,), {})

    strategy.begin_iteration()
    out = call("", root_forward, (x,), {})
    if backward:
        out.sum().backward()


def measure_net(
    iterations: int = 2, warmup: int = 0, **config: Any
) -> tuple[list[IterationMeasure], SessionStrategy]:
    """`iterations` in all, the first `warmup` of them warm-up."""
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    strategy = SessionStrategy(StrategyConfig(paths=PATHS, compat=probe(), **config))
    strategy.begin()
    try:
        measures = [
            run_iteration(
                strategy, net, x, backward=config.get("backward", False), warmup=i < warmup
            )
            for i in range(iterations)
        ]
    finally:
        strategy.end()
    return measures, strategy


def test_every_path_is_measured_with_its_call_count_and_ops() -> None:
    measures, _ = measure_net()
    measure = measures[-1]
    assert set(measure.paths) == set(PATHS)
    assert {p: m.calls for p, m in measure.paths.items()} == {
        p: 2 if p == "shared" else 1 for p in PATHS
    }
    assert "aten::addmm" in measure.paths["block.fc"].ops
    assert "aten::relu" in measure.paths["block.act"].ops
    assert measure.paths["shared"].ops["aten::tanh"].calls == 2
    assert "aten::mul" in measure.paths[""].ops  # the inline `h * 2` belongs to the root itself


def test_parents_include_children_in_total_but_not_in_self() -> None:
    measure = measure_net()[0][-1]
    block, fc, act = (measure.paths[p] for p in ("block", "block.fc", "block.act"))
    assert block.total_cpu_us >= fc.total_cpu_us + act.total_cpu_us
    assert abs(block.self_cpu_us - (block.total_cpu_us - fc.total_cpu_us - act.total_cpu_us)) < 1e-6
    root = measure.paths[""]
    children = sum(measure.paths[p].total_cpu_us for p in ("block", "shared", "head"))
    assert abs(root.self_cpu_us - (root.total_cpu_us - children)) < 1e-6
    assert sum(m.self_cpu_us for m in measure.paths.values()) <= measure.total_cpu_us + 1e-6


def test_backward_time_reaches_every_layer_with_parameters_or_ops() -> None:
    measure = measure_net(backward=True)[0][-1]
    for path in ("block.fc", "block.act", "shared", "head"):
        leaf = measure.paths[path]
        assert leaf.backward_self_cpu_us > 0, path
        assert any(op.backward for op in leaf.ops.values()), path
    assert "AddmmBackward0 [bwd]" in measure.paths["head"].ops
    assert "TanhBackward0 [bwd]" in measure.paths["shared"].ops
    block = measure.paths["block"]
    children = (
        measure.paths["block.fc"].backward_total_cpu_us
        + measure.paths["block.act"].backward_total_cpu_us
    )
    assert abs(block.backward_total_cpu_us - children - block.backward_self_cpu_us) < 1e-6
    step = sum(m.self_cpu_us + m.backward_self_cpu_us for m in measure.paths.values())
    assert step <= measure.total_cpu_us + 1e-6


def test_profile_memory_attributes_allocations_to_the_layer() -> None:
    measure = measure_net(profile_memory=True)[0][-1]
    assert measure.paths["block.fc"].self_cpu_mem > 0  # its output tensor
    assert measure.paths["block.fc"].ops["aten::addmm"].cpu_mem > 0


def test_raw_events_are_kept_per_call_only_when_asked() -> None:
    assert measure_net()[1].raw_events() == {}
    raw = measure_net(keep_raw_events=True)[1].raw_events()
    assert len(raw["shared"]) == 2 * 2  # two iterations, two calls each
    assert [e.name for e in raw["shared"][0]] == ["aten::tanh"]


def test_warm_up_iterations_are_not_worked_out() -> None:
    measures, _ = measure_net(iterations=3, warmup=2)
    assert [len(m.paths) for m in measures] == [0, 0, len(PATHS)]


def test_trace_holds_the_measured_iterations_in_one_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    measure_net(iterations=3, warmup=1, trace_path=str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    block_ranges = [e for e in events if e.get("name") == "block" and e.get("ph") == "X"]
    assert len(block_ranges) == 2


def test_through_the_runner_leaves_get_forward_and_backward_times() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    session = profile(model, torch.randn(4, 8), warmup=1, iters=2, backward=True)
    assert session.strategy == "session"
    for path in ("0", "1", "2"):
        record = session.record(path)
        assert record is not None and record.calls == 2
        assert record.backward_self_cpu_us is not None and record.backward_self_cpu_us.median > 0


def test_public_fallbacks_see_the_same_structure() -> None:
    """Without the private fast ranges and raw kineto events, the public APIs give the same tree."""
    fast, _ = measure_net(backward=True)
    compat = replace(probe(), fast_ranges="record_function", raw_events="function_events")
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    strategy = SessionStrategy(StrategyConfig(paths=PATHS, compat=compat, backward=True))
    strategy.begin()
    try:
        slow = [run_iteration(strategy, net, x, backward=True) for _ in range(2)][-1]
    finally:
        strategy.end()
    assert {p: m.calls for p, m in slow.paths.items()} == {
        p: m.calls for p, m in fast[-1].paths.items()
    }
    for path in PATHS:
        assert set(slow.paths[path].ops) == set(fast[-1].paths[path].ops), path
    assert slow.paths["head"].backward_self_cpu_us > 0


def layer_numbers(measure: IterationMeasure) -> dict[str, tuple[int, float, float]]:
    return {p: (m.calls, m.self_cpu_us, m.total_cpu_us) for p, m in measure.paths.items()}


def test_layer_ranges_alone_give_the_same_layer_numbers_as_the_full_pass() -> None:
    """The lazy first pass (ranges only) and the full pass agree exactly on calls, self and total,
    with nesting, a module called twice and an op in the root; the full pass runs only when
    asked."""
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    strategy = SessionStrategy(StrategyConfig(paths=PATHS, compat=probe()))
    strategy.begin()
    for _ in range(3):
        run_forward(strategy, net, x)
        stopped = strategy.stop_iteration()
        assert stopped is not None and stopped.layers_suffice
        layers = stopped.layer_measure()
        assert stopped.profiler is not None  # no op was read yet
        assert all(not m.ops for m in layers.paths.values())
        full = stopped.attribution().measure
        assert stopped.profiler is None  # attributed: the events are not read again
        assert layer_numbers(layers) == layer_numbers(full)
        assert layers.paths["shared"].calls == 2 and "aten::mul" in full.paths[""].ops
    strategy.end()


def test_memory_needs_the_full_pass_even_for_layer_numbers() -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    strategy = SessionStrategy(StrategyConfig(paths=PATHS, compat=probe(), profile_memory=True))
    strategy.begin()
    run_forward(strategy, net, x)
    stopped = strategy.stop_iteration()
    strategy.end()
    assert stopped is not None and not stopped.layers_suffice
    assert stopped.layer_measure().paths["head"].cpu_mem > 0
    assert stopped.profiler is None
