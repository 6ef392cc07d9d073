"""The mechanism that keeps long runs bounded: each iteration's events are released when it ends.

RSS itself is measured by benchmarks/bench_overhead.py (200 vs 20 iterations); here we check what
makes it flat: after `end_iteration()` no profiler session (which owns the raw events) is alive,
however many iterations ran, and a trace is spooled to disk rather than kept.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch
from torch import nn

from hybridprof.planner.compat import probe
from hybridprof.runtime.strategies.base import StrategyConfig
from hybridprof.runtime.strategies.session_strategy import SessionStrategy


def live_profilers() -> int:
    gc.collect()
    profiler_class = torch.autograd.profiler.profile
    return sum(type(o) is profiler_class for o in gc.get_objects())


def mlp_strategy(**config: object) -> tuple[SessionStrategy, nn.Sequential, torch.Tensor]:
    layers = nn.Sequential(*[nn.Linear(16, 16) if i % 2 == 0 else nn.ReLU() for i in range(20)])
    paths = tuple(str(i) for i in range(20))
    strategy = SessionStrategy(StrategyConfig(paths=paths, compat=probe(), **config))  # type: ignore[arg-type]
    return strategy, layers, torch.randn(2, 16)


def one_iteration(strategy: SessionStrategy, layers: nn.Sequential, x: torch.Tensor) -> int:
    strategy.begin_iteration()
    running = live_profilers()
    for i, layer in enumerate(layers):
        x = strategy.call(str(i), layer.forward, (x,), {})
    measure = strategy.end_iteration()
    assert len(measure.paths) == 20
    return running


def test_each_iteration_releases_its_session() -> None:
    strategy, layers, x = mlp_strategy()
    before = live_profilers()
    strategy.begin()
    try:
        for _ in range(6):
            assert (
                one_iteration(strategy, layers, x) == before + 1
            )  # exactly one session while running
            assert live_profilers() == before  # ... and none once the iteration is folded
    finally:
        strategy.end()


def test_a_trace_is_spooled_to_disk_not_kept(tmp_path: Path) -> None:
    strategy, layers, x = mlp_strategy(trace_path=str(tmp_path / "t.json"))
    before = live_profilers()
    strategy.begin()
    try:
        for _ in range(3):
            one_iteration(strategy, layers, x)
            assert live_profilers() == before
    finally:
        strategy.end()
    assert (tmp_path / "t.json").stat().st_size > 0
