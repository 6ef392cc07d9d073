"""The registry of measuring strategies, by the name a user gives (`strategy=` / `--strategy`)."""

from __future__ import annotations

import importlib

from hybridprof.errors import UsageError
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig

DEFAULT_STRATEGY = "session"

# name -> "module:Class"; imported on use so choosing one strategy never loads the others.
STRATEGIES = {
    "session": "hybridprof.runtime.strategies.session:SessionStrategy",
    "per-call": "hybridprof.runtime.strategies.per_call:PerCallStrategy",
    "timer": "hybridprof.runtime.strategies.timer:TimerStrategy",
}


def make_strategy(name: str, config: StrategyConfig) -> Strategy:
    target = STRATEGIES.get(name)
    if target is None:
        raise UsageError(f"unknown strategy '{name}'; use one of: {', '.join(STRATEGIES)}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    strategy: Strategy = cls(config)
    return strategy
