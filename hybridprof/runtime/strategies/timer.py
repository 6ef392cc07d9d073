"""The lowest-overhead strategy: time each patched forward, no profiler, no op breakdown.

Approach ("timer"): `time.perf_counter_ns` around each selected call, the cheapest measure
(benchmarks/README.md, bench_overhead); the wall
time is stored in the CPU-time fields (on CPU, one thread, they are the same thing). A layer's self
time is its total minus the totals of the selected layers called inside it (a stack of open calls).
On CUDA, kernels run asynchronously, so each call is bracketed by `torch.cuda.synchronize()`: the
wall time then covers the layer's kernels, at the price of serialising the GPU (that is why it is a
separate, opt-in strategy).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from hybridprof.runtime.events.event_lists import RawEvent, from_timer
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.strategies.base import MeasuredIteration, StrategyConfig


class TimerStrategy:
    """Per-layer wall time from the patched forward, nothing else."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config
        self._sync = config.use_device and config.compat.cuda_available
        self._measure = IterationMeasure()
        self._nested_ns: list[int] = []  # per open call: total ns of selected calls nested in it
        self._open: dict[str, int] = {}  # per path, its calls open now (> 1: it recursed)
        self._iteration_start = 0
        self._raw: dict[str, list[list[RawEvent]]] = {}

    def begin(self) -> None:
        return None  # nothing to start: no profiler

    def begin_iteration(self, warmup: bool = False) -> None:
        self._measure = IterationMeasure()
        self._nested_ns.clear()
        self._open.clear()
        self._iteration_start = time.perf_counter_ns()

    def start_measuring(self) -> None:
        self.begin_iteration()

    def call(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any:
        if self._sync:
            torch.cuda.synchronize()
        nested, opened = self._nested_ns, self._open
        nested.append(0)
        depth = opened.get(path, 0)
        opened[path] = depth + 1
        start = time.perf_counter_ns()
        try:
            return forward(*args, **kwargs)
        finally:
            if self._sync:
                torch.cuda.synchronize()
            end = time.perf_counter_ns()
            opened[path] = depth
            self._record(path, start, end, nested.pop(), outermost=depth == 0)

    def _record(self, path: str, start: int, end: int, nested_ns: int, outermost: bool) -> None:
        duration = end - start
        if self._nested_ns:
            self._nested_ns[-1] += duration
        measure = self._measure.path(path)
        measure.calls += 1
        if outermost:  # a recursive call's time is already in its caller's total
            measure.total_cpu_us += duration / 1000
        measure.self_cpu_us += (duration - nested_ns) / 1000
        if self.config.keep_raw_events:
            event = RawEvent(path, start / 1000, end / 1000, (duration - nested_ns) / 1000)
            self._raw.setdefault(path, []).append([event])

    def end_iteration(self, warmup: bool = False) -> IterationMeasure:  # nothing to skip
        measure = self._measure
        measure.total_cpu_us = (time.perf_counter_ns() - self._iteration_start) / 1000
        self._measure = IterationMeasure()
        return measure

    def stop_iteration(self) -> MeasuredIteration:
        return MeasuredIteration(self.end_iteration(), self.raw_events)

    def end(self) -> None:
        return None

    def raw_events(self) -> dict[str, list[Any]]:
        """Per path, one EventList per call: the call as one event named by its path."""
        return dict(from_timer(self._raw))
