"""The measuring strategies: what each can do, by the name a user gives (`strategy=` /
`--strategy`).

Torch-free: the CLI reads the names and capabilities before it imports torch. Each strategy's module
is imported on use, so choosing one never loads the others. Adding a strategy: its module here (a
class with the `Strategy` protocol of `base.py`) and one `StrategySpec` below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from hybridprof.datamodel import DEFAULT_STRATEGY
from hybridprof.errors import UsageError
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig


@dataclass(frozen=True, slots=True)
class StrategySpec:
    """A strategy's name, where its class is, and what it can do."""

    name: str
    target: str  # "module:Class", imported on use
    backward: bool  # attributes backward ops to the layer whose forward made them
    lazy_results: bool  # stop_iteration leaves the op attribution until something reads it
    device_time: bool  # measures CUDA kernel time per layer (not only host time around it)
    torch_profiler: bool  # runs torch's profiler, which cannot run inside another one


SPECS = (
    StrategySpec(
        "session",
        "hybridprof.runtime.strategies.session_strategy:SessionStrategy",
        backward=True,
        lazy_results=True,
        device_time=True,
        torch_profiler=True,
    ),
    StrategySpec(
        "per-call",
        "hybridprof.runtime.strategies.per_call:PerCallStrategy",
        backward=False,
        lazy_results=False,
        device_time=True,
        torch_profiler=True,
    ),
    StrategySpec(
        "timer",
        "hybridprof.runtime.strategies.timer:TimerStrategy",
        backward=False,
        lazy_results=False,
        device_time=False,
        torch_profiler=False,
    ),
)
STRATEGIES = {spec.name: spec for spec in SPECS}


def spec_of(name: str) -> StrategySpec:
    spec = STRATEGIES.get(name)
    if spec is None:
        raise UsageError(f"unknown strategy '{name}'; use one of: {', '.join(STRATEGIES)}")
    return spec


def backward_strategies() -> tuple[str, ...]:
    return tuple(spec.name for spec in SPECS if spec.backward)


def check_backward(name: str) -> None:
    """A backward run needs a strategy that attributes backward ops (UsageError if `name` does
    not)."""
    if not spec_of(name).backward:
        raise UsageError(
            "--backward needs a strategy that attributes backward ops "
            f"({', '.join(backward_strategies())}); '{name}' does not: "
            f"drop --strategy {name} or drop --backward"
        )


def make_strategy(name: str, config: StrategyConfig) -> Strategy:
    module_name, class_name = spec_of(name).target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    strategy: Strategy = cls(config)
    return strategy


__all__ = [
    "DEFAULT_STRATEGY",
    "SPECS",
    "STRATEGIES",
    "StrategySpec",
    "backward_strategies",
    "check_backward",
    "make_strategy",
    "spec_of",
]
