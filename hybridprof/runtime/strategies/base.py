"""The plug point between the patched forwards and the ways of measuring them.

The runtime patches each selected module's `forward` with a wrapper that calls
`strategy.call(path, original_forward, args, kwargs)`. A strategy decides what happens around that
call (a profiler range, a profiler session per call, a timer) and turns what it saw in one iteration
into an `IterationMeasure`. The runner (library `Profile` or CLI `run`) drives the iterations:

    strategy.begin()                       # once; profiler start-up happens here or in warm-up
    for each warm-up and measured iteration:
        strategy.begin_iteration()
        ... model runs, patched forwards call strategy.call(...) ...
        measure = strategy.end_iteration()  # warm-up measures are discarded
    strategy.end()                         # always, in `finally`
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hybridprof.planner.compat import Compat
from hybridprof.runtime.measure import IterationMeasure


@dataclass(frozen=True, slots=True)
class StrategyConfig:
    """What every strategy is told before it starts."""

    paths: tuple[str, ...]  # canonical paths that are patched (parents before children)
    compat: Compat
    profile_memory: bool = False
    use_device: bool = False  # measure CUDA time/memory too
    backward: bool = False  # attribute backward ops to the layer whose forward made them
    keep_raw_events: bool = False  # keep per-call event lists for Profile.raw()
    trace_path: str | None = None  # write a Chrome/Perfetto trace of the measured iterations
    # The runner's first `warmup_iterations` iterations are warm-up: a strategy may skip working out
    # their measures (the runner discards them) and leaves them out of the trace.
    warmup_iterations: int = 0


class Strategy(Protocol):
    """One way of measuring patched forwards. See the module docstring for the call order."""

    name: str

    def begin(self) -> None: ...

    def begin_iteration(self) -> None: ...

    def call(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any: ...

    def end_iteration(self) -> IterationMeasure: ...

    def end(self) -> None: ...

    def raw_events(self) -> dict[str, list[Any]]:
        """Per path, one event list per call (torchprof's `raw()` shape); empty unless kept."""
        ...
