"""The default strategy: one profiler session per iteration, a cheap range per layer call.

Approach ("session"): every selected call runs inside a profiler range named by its path
(`torch._C._profiler._RecordFunctionFast` when `Compat.fast_ranges` allows it, else the dearer
public `record_function`; see ranges.py); the ops inside are attributed to the innermost enclosing
range afterwards (events/attribution.py), from raw events read cheaply (events/kineto.py). Compared
with torchprof's profiler-per-call this costs one start/stop per iteration instead of one per layer
call, and it sees every layer under the same profiler, so small layers are not inflated.

Memory stays bounded however long the run: the profiler is stopped at the end of every iteration,
its events are folded into that iteration's per-path `IterationMeasure`, and the profiler object
(which owns the events) is dropped before the next iteration starts. Restarting the autograd
profiler each iteration is cheaper than torch.profiler's schedule, which stops and restarts kineto
per cycle in the same way but also imports torch._inductor (seconds) on first use (figures:
benchmarks/README.md, "Measured in passing").

`end_iteration` works an iteration out at once (the run loop's way). `stop_iteration` only stops the
profiler and hands back a `StoppedIteration` that works out as much as its reader asks for, when
asked: the library `Profile` uses it so that `str(prof)` reads only the layer ranges.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.runtime.basics.quiet import allocator_warning_spent, quiet_fd2
from hybridprof.runtime.basics.signals import sigint_deferred
from hybridprof.runtime.events.attribution import Attribution, attribute, range_name
from hybridprof.runtime.events.event_columns import (
    EventColumns,
    attribute_columns,
    attribute_layer_columns,
    read_columns,
)
from hybridprof.runtime.events.event_lists import ListOptions, from_frames
from hybridprof.runtime.events.frames import Frame
from hybridprof.runtime.events.kineto import MEASURE_MARK, Event, TraceParts, read_events
from hybridprof.runtime.events.steps import on_step_clock, split_columns, split_events
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.strategies.base import StepMemory, StrategyConfig
from hybridprof.runtime.strategies.ranges import new_autograd_profiler, range_factory


class SessionStrategy:
    """One `torch.autograd.profiler.profile` per iteration; ranges per selected call."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config
        self._range_names = {path: range_name(path) for path in config.paths}
        self._paths_by_range = {name: path for path, name in self._range_names.items()}
        self._make_range = range_factory(config.compat.fast_ranges)
        self._profiler: Any = None
        self._raw: dict[str, list[Frame]] = {}  # per path, per call: the layer's frame
        self._kernels: dict[int, list[tuple[str, int, float]]] = {}
        self._trace = TraceParts(config.trace_path) if config.trace_path else None
        self._mark_window: tuple[int, int] | None = None  # wall clock around the measure mark
        self._memory = config.memory if config.profile_memory else None  # per-layer memory

    # -- the Strategy protocol

    def begin(self) -> None:
        """Start and stop the profiler once, so its first-start cost is never inside an
        iteration."""
        self._start()
        self._stop()
        if self._memory is not None:
            self._memory.install()

    def begin_iteration(self, warmup: bool = False) -> None:
        """A warm-up runs without the profiler: it warms the model, the allocator and the caches,
        and its events would only be thrown away (at 10,000 layers stopping the profiler is a
        large part of an iteration: benchmarks/README.md, bench_whole). Each measured iteration
        still runs its warm step under its own session (see `start_measuring`), so the first
        measured layer is not cold."""
        self._mark_window = None
        if not warmup:
            self._start()
            if self._memory is not None:
                self._memory.begin()  # the step starts here, or at the mark if one comes

    def start_measuring(self) -> None:
        """Mark where the iteration's measure starts: events before the mark (the runner's warm
        step, run under this same profiler session) are dropped when the events are read."""
        if self._memory is not None:
            self._memory.begin()
        before = time.time_ns()
        with self._make_range(MEASURE_MARK):
            pass
        self._mark_window = (before, time.time_ns())

    def call(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any:
        memory = self._memory
        with self._make_range(self._range_names[path]):
            if memory is None:
                return forward(*args, **kwargs)
            memory.enter(path)
            try:
                return forward(*args, **kwargs)
            finally:
                memory.exit()

    def end_iteration(self, warmup: bool = False) -> IterationMeasure:
        stopped = self.stop_iteration()
        if stopped is None or warmup:
            return IterationMeasure()  # warm-up iterations are not worth the work
        if self._trace is not None:
            self._trace.add(stopped.profiler)
        measure = stopped.measure()
        if self.config.keep_raw_events:
            kept = stopped.kept_calls()
            for path, calls in kept.raw_calls.items():
                self._raw.setdefault(path, []).extend(calls)
            self._kernels.update(kept.kernels)
        return measure

    def stop_iteration(self) -> StoppedIteration | None:
        """Stop this iteration's profiler and leave its events unread (None if none was running).

        For callers that may never need the ops (the library `Profile`): the caller decides when,
        and how much, to work out. The trace and the kept raw events are `end_iteration`'s job.
        """
        step_memory = self._memory.end() if self._memory is not None else None
        profiler = self._stop()
        if profiler is None:
            return None
        return StoppedIteration(
            profiler, self.config, self._paths_by_range, self._mark_window, step_memory
        )

    def end(self) -> None:
        self._stop()
        if self._memory is not None:
            self._memory.uninstall()
        if self._trace is not None:
            self._trace.write()

    def raw_events(self) -> dict[str, list[Any]]:
        """torch EventLists, built on first use from the kept frames (most runs never ask)."""
        with gc_paused():
            return from_frames(self._raw, self._kernels, list_options(self.config))

    # -- the profiler

    def _start(self) -> None:
        if self._profiler is not None:
            return
        profiler = new_autograd_profiler(self.config)
        with sigint_deferred(), quiet_fd2():
            with allocator_warning_spent(self.config.profile_memory):
                profiler.__enter__()
            self._profiler = profiler

    def _stop(self) -> Any:
        with sigint_deferred():
            profiler, self._profiler = self._profiler, None
            if profiler is not None:
                if self.config.use_device:
                    torch.cuda.synchronize()  # queued kernels would be lost to the next session
                with quiet_fd2():
                    profiler.__exit__(None, None, None)
        return profiler


class StoppedIteration:
    """One stopped profiler session, worked out only as far as a reader needs (the lazy
    `IterationResult` of base.py).

    Why lazy: the commonest reader, `str(prof)`, shows only each layer's calls and self/total CPU
    time, and those come from the layer ranges alone (`layer_measure`). The events are read once
    into columns (`event_columns.read_columns`), which both passes use; the full pass
    (`attribution`: ops, and memory, backward and device time where measured) runs the first time
    something needs ops. The stopped profiler, which owns the events, is dropped with this result
    (not when it is read: see `__init__`).

    A with-block's session holds step ranges (`events/steps.py`): its measure is that of its one
    measured step, and `step_measures` gives one per measured step of a window of several. The
    events say whether a step trained (a backward node, an optimizer's range) or ran FSDP2's
    ranges (`event_columns.training`): then they are walked with their backward links, else the
    forward's array passes do.
    """

    def __init__(
        self,
        profiler: Any,
        config: StrategyConfig,
        names: Mapping[str, str],
        mark_window: tuple[int, int] | None = None,
        memory: StepMemory | None = None,
    ) -> None:
        self.profiler = profiler  # None once its events are read
        # torch's events stay alive as long as this result, as a torch profiler keeps its own
        # until it is dropped: freeing them takes as long as reading them (a with-block's result
        # lives with its Profile; the run loop drops each iteration's when it is worked out)
        self._events_owner = profiler
        self._memory = memory
        self._mark_window = mark_window
        self.config = config
        self._names = names
        self._columns: EventColumns | None = None  # the events, read once (`layers_suffice`)
        self._result: Attribution | None = None
        self._kept: Attribution | None = None  # with the per-call frames, for raw()
        self._layers: IterationMeasure | None = None
        self._training: bool | None = None  # known once the events are read

    @property
    def _plain(self) -> bool:
        """Forward-style events only: no memory or device events, no compiled code, no
        tensor-parallel layers (their hooks ranges and collectives need the walk), raw kineto
        events to read."""
        config = self.config
        plain = not (
            config.profile_memory or config.use_device or config.backward or config.record_shapes
        )
        return plain and config.compat.raw_events == "kineto" and config.compiled is None

    @property
    def layers_suffice(self) -> bool:
        """True when layer ranges alone give every per-layer number this session measures: no
        memory, device or backward time, no optimizer, no compiled code, and raw kineto events to
        read them from."""
        if not self._plain:
            return False
        if self._training is None:
            self._training = self._read_columns().training
        return not self._training

    def layer_measure(self) -> IterationMeasure:
        """Per-layer calls and self/total CPU time; no ops, and `total_cpu_us` is 0 unless the
        full pass already ran (or had to: `layers_suffice` is False)."""
        if self._result is not None:
            return self._result.measure
        if not self.layers_suffice:
            return self.attribution().measure
        if self._layers is None:
            with gc_paused():
                self._layers = attribute_layer_columns(self._read_columns(), self._names)
        return self._layers

    def measure(self) -> IterationMeasure:
        return self.attribution().measure

    def raw_events(self) -> dict[str, list[Any]]:
        """Per path, one torch EventList per call (attributing first if not done yet)."""
        kept = self.kept_calls()
        with gc_paused():
            return from_frames(kept.raw_calls, kept.kernels, list_options(self.config))

    def attribution(self) -> Attribution:
        """Every event attributed (the first call reads them all; none are read again).

        Forward on the CPU without memory (`layers_suffice`): from the columns the layer numbers
        came from too, in array passes; the per-call frames of `raw()` are walked only when asked
        (`kept_calls`). Otherwise the events are walked one by one (attribution.py)."""
        if self._result is None:
            with gc_paused():
                if self._plain:
                    self._result = self._from_columns(self._read_columns())
                else:
                    self._result = self._kept = self._walk()
            self.profiler = None
        return self._result

    def step_measures(self, keep_raw: bool = False) -> list[IterationMeasure]:
        """One measure per measured step of the session's window, in order (warm-up steps and
        what ran between steps left out); the events are not read again. `keep_raw`: keep what
        `raw_events()` needs of the measured steps' calls (when the config asks for them)."""
        keep_raw = keep_raw and self.config.keep_raw_events
        with gc_paused():
            if self._plain:
                columns = self._read_columns()
                self.profiler = None
                active = [(s, at) for s, at in split_columns(columns) or [] if s.active]
                measures = [
                    on_step_clock(self._columns_measure(columns.subset(at)), step)
                    for step, at in active
                ]
                self._columns = None
                if keep_raw and active:  # walked for raw() only if it is asked for
                    self._columns = columns.subset(np.concatenate([at for _, at in active]))
                return measures
            events = self._read_events()
            found = [(s, part) for s, part in split_events(events) or [] if s.active]
            if keep_raw and found:
                self._kept = self._walk_events([e for _, part in found for e in part])
            measures = [
                on_step_clock(
                    self._with_memory(self._walk_events(part, keep_raw=False), part).measure, step
                )
                for step, part in found
            ]
            self.profiler = None
            return measures

    def kept_calls(self) -> Attribution:
        """The attribution with each layer call's frames (empty unless `keep_raw_events`)."""
        if self._result is None and self.profiler is not None:
            self.attribution()
        if self._kept is None:
            if self._columns is None:  # nothing kept: nothing asked to be
                return Attribution(IterationMeasure(), {}, {})
            with gc_paused():
                self._kept = attribute(
                    self._columns.events(),
                    self._names,
                    backward=self._columns.training,
                    keep_raw=True,
                )
        return self._kept

    def _from_columns(self, columns: EventColumns) -> Attribution:
        """The session's one measured step (or, without step ranges, all of it) from columns."""
        self.profiler = None  # its events are in the columns
        steps = split_columns(columns)
        active = [(step, at) for step, at in steps or [] if step.active]
        if steps is None:
            part = columns
        else:
            part = columns.subset(active[0][1] if active else np.zeros(0, dtype=np.int64))
        if columns.training:
            result = attribute(
                part.events(), self._names, backward=True, keep_raw=self.config.keep_raw_events
            )
            self._kept = result
        else:
            result = Attribution(attribute_columns(part, self._names), {}, {})
        if not self.config.keep_raw_events or columns.training:
            self._columns = None
        else:
            self._columns = part
        if active:
            on_step_clock(result.measure, active[0][0])
        return result

    def _columns_measure(self, part: EventColumns) -> IterationMeasure:
        if part.training:
            return attribute(part.events(), self._names, backward=True).measure
        return attribute_columns(part, self._names)

    def _read_columns(self) -> EventColumns:
        if self._columns is None:
            self._columns = read_columns(self.profiler, self._mark_window)
        return self._columns

    def _read_events(self) -> list[Event]:
        config = self.config
        # A step the runner did not mark (a with-block) may run a backward of its own: memory
        # in it needs the links to attribute its nodes.
        memory_links = self._memory is not None and self._mark_window is None
        return read_events(
            self.profiler,
            config.compat.raw_events,
            # with recorded shapes (tensor parallel), the collectives' bytes are read there too
            links=config.backward or config.training or memory_links or config.record_shapes,
            device=config.use_device,
        )

    def _walk(self) -> Attribution:
        """The walk over every event; a with-block's over its one measured step."""
        events = self._read_events()
        found = split_events(events)
        if found is None:
            return self._with_memory(self._walk_events(events), events)
        active = [(step, part) for step, part in found if step.active]
        part = active[0][1] if active else []
        result = self._with_memory(self._walk_events(part), part)
        if active:
            on_step_clock(result.measure, active[0][0])
        return result

    def _walk_events(self, events: list[Event], keep_raw: bool = True) -> Attribution:
        config = self.config
        if config.compiled is not None:  # kernels of compiled code: compiled/kernel_events.py
            found: Attribution = config.compiled.attribute(
                events,
                self._names,
                backward=config.backward or config.training,
                keep_raw=keep_raw and config.keep_raw_events,
            )
            return found
        return attribute(
            events,
            self._names,
            backward=config.backward or config.training,
            keep_raw=keep_raw and config.keep_raw_events,
        )

    def _with_memory(self, result: Attribution, events: list[Event]) -> Attribution:
        """The measure with its per-layer memory replayed from `events` (with profile_memory).

        A session with memory holds one measured step (the step loop restarts it for each), so
        the capture's records are that step's."""
        if self._memory is not None and self.config.compat.raw_events == "kineto":
            result.measure.memory = self._memory.replay(events, self.profiler, self._names)
        return result


def list_options(config: StrategyConfig) -> ListOptions:
    """What torch would have labelled the event lists with for this configuration."""
    return ListOptions("cuda" if config.use_device else None, config.profile_memory)
