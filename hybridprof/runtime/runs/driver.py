"""The driver of one model in a run: make the strategy, begin, patch, iterate, stop, build the
session.

`Driver` holds the steps for one model; every way of driving a run puts them together through it:
the iteration loop (`iteration_loop.py`: the fixed run of `hybridprof.profile()` and `hybridprof
run`, and the paired runs of `diff --run` and `--compare-eager`) calls `iteration()` around each
step, and the user's own steps in a `Profile` with-block (`user_steps.py`) use its strategy and
patches directly. Either way the driver samples the machine's load between iterations
(`basics/machine.py`), and every session it builds carries the stability verdict.

The plan a driver is given is trusted: whoever took it from outside (a plan file, a library user)
has checked it against the model (`planner.plan_check.checked_plan`); a plan made for this model
one line earlier is not walked or probed again.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import Calibration, ProfilePlan, ProfileSession
from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.errors import HybridprofError, ModelRunError
from hybridprof.files.loader import keeping_cwd
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import module_at
from hybridprof.runtime.basics.cpu_wait import WaitClock
from hybridprof.runtime.basics.failure import failure_hint
from hybridprof.runtime.basics.machine import LoadWatch
from hybridprof.runtime.basics.patching import CallFn, ForwardPatcher
from hybridprof.runtime.basics.workload import BackwardFailed, ShapeRecorder
from hybridprof.runtime.compiled.compiled_run import CompiledRun
from hybridprof.runtime.distributed.fsdp_units import fsdp_unit_bytes
from hybridprof.runtime.distributed.tp_layers import HookRanges, tp_layers
from hybridprof.runtime.measures.aggregate import RunFacts, as_table, build_session
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.measures.measure_table import MeasureTable
from hybridprof.runtime.memory.capture import MemoryCapture
from hybridprof.runtime.runs.guards import first_line, refuse_nesting
from hybridprof.runtime.strategies import make_strategy
from hybridprof.runtime.strategies.base import IterationResult, Strategy, StrategyConfig
from hybridprof.runtime.strategies.calibrate import session_calibration

# Bare steps timed after a fixed run's measured iterations (`Driver.time_bare_steps`): their median
# scales the calibrated costs to what the workload paid.
BARE_STEPS = 5

# profile_memory with a strategy that does not replay the allocation events (per-call, timer):
NET_MEMORY_ONLY = (
    "per-layer memory (peaks, bytes saved for backward, the step's peak) is measured by the "
    "session strategy only: drop --strategy (strategy=) to get it"
)


def _config_for_run(
    config: StrategyConfig,
    model: nn.Module,
    optimizers: Sequence[Any],
    inputs: Any,
    *,
    with_shapes: bool,
) -> StrategyConfig:
    """`config` with what this run adds: a memory capture where memory is profiled without one
    (the optimizers' state and the inputs are told apart at the peak), and recorded shapes where
    tensor-parallel collectives need their bytes."""
    if config.profile_memory and config.memory is None:
        capture = MemoryCapture(model, optimizers=optimizers, inputs=inputs)
        config = replace(config, memory=capture)
    return replace(config, record_shapes=True) if with_shapes else config


def _patcher(
    model: nn.Module,
    plan: ProfilePlan,
    call: CallFn,
    reset_modes: bool,
    compiled: CompiledRun | None,
) -> ForwardPatcher:
    """The patches of the selected layers' forwards; in a compiled run, none inside the compiled
    code, and its call-impl layers patched at `_call_impl`."""
    layout = compiled.layout if compiled is not None else None
    return ForwardPatcher(
        model,
        plan.selected_paths(),
        call,
        reset_modes=reset_modes,
        skip=layout.inside if layout else frozenset(),
        call_impl=layout.call_impl if layout else frozenset(),
    )


class Driver:
    """One profiled run of `model` under `plan`: the strategy, the patches and the clock."""

    def __init__(
        self,
        model: nn.Module,
        plan: ProfilePlan,
        strategy_name: str,
        config: StrategyConfig,
        *,
        record_shapes: bool = False,
        reset_modes: bool = True,
        optimizers: Sequence[Any] = (),
        inputs: Any = None,
        compiled: CompiledRun | None = None,
    ) -> None:
        refuse_nesting(strategy_name)
        self.model = model
        self.plan = plan
        self.strategy_name = strategy_name
        # The session strategy's cost is calibrated and taken out of the rows; compiled code's
        # kernels and the other strategies' costs are not (their rows stay raw).
        self.calibrated = strategy_name == "session" and compiled is None
        self.bare_steps_us: list[float] = []  # the step timed bare (`time_bare_steps`)
        # Tensor-parallel layers (DTensor): each call in a range with its hooks while patched,
        # and the collectives' shapes recorded for their bytes. Compiled code has no hooks run.
        self.tp = tp_layers(model, config.paths) if compiled is None else {}
        self._tp_ranges = HookRanges(model, tuple(self.tp))
        self.config = _config_for_run(config, model, optimizers, inputs, with_shapes=bool(self.tp))
        self.strategy: Strategy = make_strategy(strategy_name, self.config)
        # Shapes are noted in the first iteration only, outside the strategy's ranges.
        self.shapes = ShapeRecorder(self.strategy.call) if record_shapes else None
        call = self.shapes.call if self.shapes is not None else self.strategy.call
        self.patcher = _patcher(model, plan, call, reset_modes, compiled)
        self.started_at = ""
        self.seconds = 0.0
        self.step_us = 0.0  # wall time of the last iteration's step (what an auto warm-up judges)
        self.watch = LoadWatch()  # other work on the machine, sampled between iterations
        self.threads = torch.get_num_threads()
        self._clock = 0.0
        self.waits = WaitClock.closed()  # opened by `begin`, on the thread that runs the steps
        self.step_wait_us: float | None = None  # what the last measured step waited for a CPU

    @staticmethod
    def config_for(
        plan: ProfilePlan,
        device: torch.device | None,
        *,
        profile_memory: bool = False,
        backward: bool = False,
        keep_raw_events: bool = False,
        trace_path: str | None = None,
        training: bool = False,
    ) -> StrategyConfig:
        return StrategyConfig(
            paths=plan.selected_paths(),
            compat=probe(),
            profile_memory=profile_memory,
            use_device=device is not None and device.type == "cuda",
            backward=backward,
            keep_raw_events=keep_raw_events,
            trace_path=trace_path,
            training=training,
        )

    # -- begin, patch, iterate, stop

    def begin(self) -> None:
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._clock = time.perf_counter()
        self.threads = torch.get_num_threads()
        self.waits = WaitClock()
        self.watch.sample()
        self.strategy.begin()

    def patch(self) -> None:
        self.patcher.patch()
        self._tp_ranges.install()

    def restore(self) -> None:
        try:
            self._tp_ranges.uninstall()
        finally:
            self.patcher.restore()

    @property
    def times_bare_steps(self) -> bool:
        """Whether this run times its step bare (`time_bare_steps`): a calibrated one whose step
        runs the same with its patches off. Not with memory capture (its hooks stay in), device time
        (the step's CPU time is not what the device spends) or tensor-parallel layers (their
        hooks)."""
        config = self.config
        return self.calibrated and not (config.profile_memory or config.use_device or self.tp)

    def time_bare_steps(self, step: Callable[[], None], count: int) -> None:
        """`step` `count` times with the patches off and no profiler (between iterations none
        runs), timed, after one untimed warm run (the first after the patches come off is
        cold): the workload's own time, which scales the calibrated costs to what it paid
        (`Calibration.bare_step_us`). The patches come off and back once, not per step: at
        10,000 layers each time costs about as much as a forward."""
        self.restore()
        try:
            with keeping_cwd(), gc_paused():
                step()
                for _ in range(count):
                    start = time.perf_counter()
                    step()
                    self.bare_steps_us.append((time.perf_counter() - start) * 1e6)
        except (Exception, SystemExit) as exc:
            raise ModelRunError(self._failure_message(exc)) from exc
        finally:
            self.patcher.patch_again()  # what the measured steps recorded is kept
            self._tp_ranges.install()

    def iteration(
        self, step: Callable[[], None], warm: bool = False, warmup: bool = False
    ) -> IterationMeasure:
        """One iteration around `step`; a failure closes the iteration and names the layer. A
        warm-up's measure is not worked out (empty) and stays out of the trace.

        With `warm` the step first runs unmeasured, its patched forwards passing straight through,
        and only the second run is measured: on a chain of 1,000 Linear(16,16) the first layer
        read several times the others without it (the previous iteration's event reading, the
        profiler's restart, or a pause had left the CPU's caches cold), close to them with it
        (figures: benchmarks/README.md, check_coverage.py --chain). The cyclic GC
        waits for the gap between iterations: a collection inside the step (tens of ms in a
        process holding torch) would land in whichever layer was running.
        """
        strategy = self.strategy
        strategy.begin_iteration(warmup)
        try:
            with keeping_cwd(), gc_paused():
                if warm and self.shapes is not None:
                    self.shapes.passthrough = True
                    try:
                        step()
                    finally:
                        self.shapes.passthrough = False
                    self.patcher.rewrap_replaced(measured=False)
                strategy.start_measuring()
                waited = self.waits.read()
                start = time.perf_counter()
                step()
                self.step_us = (time.perf_counter() - start) * 1e6
                self.step_wait_us = self._waited_since(waited)
                # What the step ran with (a model may set torch's threads itself): the session's.
                self.threads = torch.get_num_threads()
                self.patcher.rewrap_replaced(measured=not warmup)
        except HybridprofError:
            self._abandon_iteration()
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() in forward is a model failure too
            self._abandon_iteration()
            raise ModelRunError(self._failure_message(exc)) from exc
        except BaseException:  # KeyboardInterrupt: close the iteration, the caller decides
            self._abandon_iteration()
            raise
        finally:
            if self.shapes is not None:
                self.shapes.recording = False
        measure = strategy.end_iteration(warmup)
        self.watch.sample()
        return measure

    def _calibration(self) -> Calibration | None:
        """The session's calibration, with the bare step's median where enough were timed."""
        found = session_calibration() if self.calibrated else None
        if found is None or len(self.bare_steps_us) < BARE_STEPS:
            return found
        return replace(found, bare_step_us=round(statistics.median(self.bare_steps_us), 3))

    def stop(self) -> IterationResult | None:
        """Stop the open iteration (begun by `strategy.begin_iteration`), results left unread."""
        self.mark_end()
        result = self.strategy.stop_iteration()
        self.watch.sample()
        return result

    def mark_end(self) -> None:
        """The run's length: from `begin()` until now."""
        self.seconds = time.perf_counter() - self._clock

    def end(self) -> None:
        self.waits.close()
        self.strategy.end()

    def _waited_since(self, before: int | None) -> float | None:
        """Microseconds this thread waited for a CPU since `before` (ns; None: unknown)."""
        now = self.waits.read()
        return None if before is None or now is None else (now - before) / 1000

    def build_session(
        self, measures: MeasureTable | Sequence[IterationMeasure], facts: RunFacts
    ) -> ProfileSession:
        """The session of `measures`; what was measured and when it started come from here."""
        table = as_table(measures)
        said = self.thread_warning()
        facts = replace(
            facts,
            environment=replace(facts.environment, threads=self.threads),
            warnings=facts.warnings + ((said,) if said else ()) + self.patcher.patch_warnings(),
            profile_memory=self.config.profile_memory,
            use_device=self.config.use_device,
            backward=self.config.backward,
            started_at=self.started_at,
            tp_groups=tuple(self.tp.items()),
            calibration=self._calibration(),
            # an FSDP2-sharded model's units, read after the steps (which set their dtypes)
            fsdp_sizes=facts.fsdp_sizes or fsdp_unit_bytes(self.model),
            stability=self.watch.stability(
                table.total_cpu_us,
                self.threads,
                iters_auto=facts.requested_iterations == "auto",
            ),
        )
        session = build_session(self.plan, table, self.strategy_name, facts)
        memory = session.memory
        if self.config.profile_memory and len(table) and (memory is None or not memory.devices):
            why = memory.notes if memory is not None else (NET_MEMORY_ONLY,)
            session = replace(session, memory=None, warnings=(*session.warnings, *why))
        shapes = self.shapes
        if shapes is None:
            return session
        return replace(session, records=tuple(shapes.apply(r) for r in session.records))

    def thread_warning(self) -> str | None:
        """What to say when profiled layers were also called from other threads (not measured)."""
        calls = self.patcher.foreign_calls
        if not calls:
            return None
        return (
            f"{calls} call{'s' if calls > 1 else ''} of profiled layers came from other threads "
            "and are not measured: hybridprof measures the thread that started profiling; "
            "profile each thread's work on its own"
        )

    # -- helpers

    def _abandon_iteration(self) -> None:
        """Close an iteration that failed half-way so `end()` finds a consistent strategy."""
        with contextlib.suppress(Exception):
            self.strategy.end_iteration(warmup=True)  # its measure is dropped: skip the work

    def _failure_message(self, exc: BaseException) -> str:
        text = first_line(exc)
        if isinstance(exc, BackwardFailed):
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            return (
                f"the backward pass of {type(self.model).__name__} failed: {first_line(cause)}; "
                "profile without --backward to check the forward alone"
            )
        path = self.patcher.failed_path
        if path is None:
            where = "the training step" if self.config.backward else "the forward"
            failed = f"{where} of {type(self.model).__name__} failed outside the profiled layers"
            return _with_hint(f"{failed}: {text}", exc)
        target = self.plan.target(path)
        cls = target.class_name if target else type(module_at(self.model, path)).__name__
        return _with_hint(f"forward failed in {path or '(root)'} ({cls}): {text}", exc)


def _with_hint(message: str, exc: BaseException) -> str:
    hint = failure_hint(exc)
    return f"{message}; {hint}" if hint else message


__all__ = ["NET_MEMORY_ONLY", "Driver"]
