"""torchprof's method: one autograd profiler per selected call ("per-call" strategy).

Each outermost selected call runs under its own `torch.autograd.profiler.profile`, and its EventList
is kept for `Profile.raw()` exactly as torchprof kept them. The autograd profiler cannot nest, so a
selected module called while a selected parent is being profiled gets a profiler range instead
(named by `events.range_label`); its ops are then attributed to it, and the parent's self time
excludes them.

What changed from torchprof: totals are the sum of top-level ops (torchprof summed every nested
event's inclusive time, counting a conv three times), and events are folded after the iteration so
the profiler's post-processing never runs inside a measured call. This method costs a profiler
start/stop per call and inflates small layers (benchmarks/README.md, bench_overhead); "session"
is the default for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from hybridprof.runtime.basics.quiet import allocator_warning_spent, quiet_fd2
from hybridprof.runtime.basics.signals import sigint_deferred
from hybridprof.runtime.events.event_lists import ListOptions, built
from hybridprof.runtime.events.function_events import (
    CallFolder,
    EventFields,
    descendants,
    range_label,
    ranges_by_path,
    top_level,
)
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.strategies.base import MeasuredIteration, StrategyConfig
from hybridprof.runtime.strategies.ranges import new_autograd_profiler, range_factory


class PerCallStrategy:
    """One profiler per outermost selected call; ranges for selected calls nested inside it."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config
        self._fields = EventFields.for_compat(config.compat.event_fields)
        self._labels = {path: range_label(path) for path in config.paths}
        self._paths_by_label = {label: path for path, label in self._labels.items()}
        self._make_range = range_factory(config.compat.fast_ranges)
        self._depth = 0  # > 0 while an outermost call's profiler runs
        self._pending: list[tuple[str, Any]] = []  # (path, stopped profiler) of this iteration
        self._raw: dict[str, list[Any]] = {}

    # -- the Strategy protocol

    def begin(self) -> None:
        """Start and stop a profiler once, so its first-start cost is never inside a call."""
        profiler = new_autograd_profiler(self.config)
        with sigint_deferred(), quiet_fd2():
            with allocator_warning_spent(self.config.profile_memory):
                profiler.__enter__()
            profiler.__exit__(None, None, None)

    def begin_iteration(self, warmup: bool = False) -> None:
        self._pending = []

    def start_measuring(self) -> None:
        """Nothing to drop: each call starts its own profiler, and the warm step makes no calls."""
        return None

    def call(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any:
        if self._depth:
            with self._make_range(self._labels[path]):
                return forward(*args, **kwargs)
        profiler = new_autograd_profiler(self.config)
        entered = False
        self._depth += 1
        try:
            with sigint_deferred(), quiet_fd2():
                profiler.__enter__()
                entered = True  # a Ctrl-C held until here still stops it in `finally`
            result = forward(*args, **kwargs)
        finally:
            self._depth -= 1
            if entered:
                self._stop(profiler)
        self._pending.append((path, profiler))
        return result

    def end_iteration(self, warmup: bool = False) -> IterationMeasure:
        pending, self._pending = self._pending, []
        measure = IterationMeasure()
        if warmup:
            return measure  # warm-up measures are discarded: skip the post-processing
        folder = CallFolder(measure, self._fields, self.config.use_device)
        for path, profiler in pending:
            events = self._events(profiler)
            measure.total_cpu_us += folder.fold_call(path, top_level(events)).cpu
            if self.config.keep_raw_events:
                self._keep_raw(path, events)
        return measure

    def stop_iteration(self) -> MeasuredIteration:
        return MeasuredIteration(self.end_iteration(), self.raw_events)

    def end(self) -> None:
        self._pending = []

    def raw_events(self) -> dict[str, list[Any]]:
        return dict(self._raw)

    # -- helpers

    def _stop(self, profiler: Any) -> None:
        if self.config.use_device:
            torch.cuda.synchronize()  # queued kernels would be missed by this call's profiler
        with sigint_deferred(), quiet_fd2():
            profiler.__exit__(None, None, None)

    def _events(self, profiler: Any) -> Any:
        events = profiler.function_events
        if self.config.compat.children == "populate_cpu_children":
            events.populate_cpu_children()
        return events

    def _keep_raw(self, path: str, events: Any) -> None:
        """torchprof's shape: per path, one event list per call (nested calls: their range's
        events)."""
        self._raw.setdefault(path, []).append(events)
        for nested_path, ranges in ranges_by_path(events, self._paths_by_label).items():
            for event in ranges:
                self._raw.setdefault(nested_path, []).append(self._event_list(descendants(event)))

    def _event_list(self, events: list[Any]) -> Any:
        """A nested call's events: already linked in the outer call's tree."""
        use_device = "cuda" if self.config.use_device else None
        return built(events, ListOptions(use_device, self.config.profile_memory))


__all__ = ["PerCallStrategy"]
