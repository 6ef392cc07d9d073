"""The one driver of a profiled run: make the strategy, begin, patch, iterate, stop, build the
session.

`Driver` holds the steps; two callers put them together:
- `run()`, for `hybridprof.profile()` and `hybridprof run`: `warmup` unmeasured iterations (the
  first profiled steps of torch are far slower than the rest, and the profiler's start-up is paid
  there), then `iters` measured ones, always restoring the model. Either count may be "auto", with a
  time limit (`runtime/stopping.py` decides when each phase ends). Ctrl-C during the measured
  iterations keeps what was measured and marks the session `interrupted`; a model that raises
  becomes a `ModelRunError` naming the layer.
- the library `Profile`: the user's with-block is the one iteration, stopped lazily.

Either way the driver samples the machine's load between iterations (`runtime/machine.py`), and
every session it builds carries the stability verdict.

The plan a driver is given is trusted: whoever took it from outside (a plan file, a library user)
has checked it against the model (`planner.plan.checked_plan`); a plan made for this model one line
earlier is not walked or probed again.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession, StopReason
from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.errors import HybridprofError, ModelRunError, UsageError
from hybridprof.files.loader import ModelInputs, as_model_inputs, keeping_cwd
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import module_at
from hybridprof.runtime.compiled.run import EXTRA_WARMUP, CompiledRun, compiled_run
from hybridprof.runtime.failure import failure_hint
from hybridprof.runtime.flops.counter import with_work
from hybridprof.runtime.guards import first_line, refuse_nesting
from hybridprof.runtime.limits import threads_problem
from hybridprof.runtime.machine import LoadWatch
from hybridprof.runtime.measures.aggregate import (
    RunFacts,
    as_table,
    build_session,
    environment,
    never_ran_warning,
)
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.measures.table import MeasureTable
from hybridprof.runtime.memory.capture import MemoryCapture
from hybridprof.runtime.model_state import model_state_kept, random_state_kept
from hybridprof.runtime.patching import ForwardPatcher
from hybridprof.runtime.stopping import AUTO, Count, IterationRule, unconverged
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, check_backward, make_strategy
from hybridprof.runtime.strategies.base import IterationResult, Strategy, StrategyConfig
from hybridprof.runtime.workload import (
    BackwardFailed,
    ShapeRecorder,
    forward_once,
    model_device,
    placed_on,
    resolve_device,
    to_device,
    torch_threads,
    training_step,
)

# profile_memory with a strategy that does not replay the allocation events (per-call, timer):
NET_MEMORY_ONLY = (
    "per-layer memory (peaks, bytes saved for backward, the step's peak) is measured by the "
    "session strategy only: drop --strategy (strategy=) to get it"
)

# phase ("warmup" or "measure"), iterations done in that phase, iterations in that phase (None:
# decided as the run goes, "auto")
ProgressFn = Callable[[str, int, int | None], None]


# One training step or forward of the model on its inputs (the default, or the caller's: a
# data-parallel rank steps through its DistributedDataParallel wrapper).
StepFn = Callable[[nn.Module, ModelInputs], Any]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run: iterations, what to measure, and what to record about the run."""

    warmup: Count = 3  # or "auto": until iteration times stop falling
    iters: Count = 20  # or "auto": until the median iteration time is known to ±3% (stopping.py)
    max_time_s: float | None = None  # time limit of the iterations; None: 30 s for auto, else none
    strategy: str | None = None  # None: the plan's strategy, else DEFAULT_STRATEGY
    device: str | None = None  # None: wherever the model is
    profile_memory: bool = False
    backward: bool = False
    trace_path: str | None = None
    threads: int | None = None  # torch intra-op threads for the run; None: leave torch's setting
    # Run each measured step once unmeasured first, under the same profiler session: what the
    # work between iterations (reading the last one's events) evicted from the CPU's caches is
    # then back before the first layer runs, instead of landing in its time (Driver.iteration).
    warm_step: bool = True
    command: tuple[str, ...] = ()
    model_file: str | None = None
    model_hash: str | None = None
    flops: bool = False  # count FLOPs and bytes per layer in one extra pass, measure the peak
    peak_gflops: float | None = None  # the machine's peak, given instead of measured
    peak_gbps: float | None = None
    compiled_by_hybridprof: bool = False  # the model is hybridprof's torch.compile of the user's

    def check(self) -> IterationRule:
        """Refuse bad values; the rule that decides how many iterations run."""
        if self.threads is not None and (problem := threads_problem(self.threads, "--threads")):
            raise UsageError(problem)
        for name, value in (("peak_gflops", self.peak_gflops), ("peak_gbps", self.peak_gbps)):
            if value is not None and not 0 < value < float("inf"):
                raise UsageError(f"{name} must be a positive number, got {value}")
        return IterationRule.of(self.warmup, self.iters, self.max_time_s)


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
        if config.profile_memory and config.memory is None:
            # per-layer memory; the optimizers' state and the inputs are told apart at the peak
            capture = MemoryCapture(model, optimizers=optimizers, inputs=inputs)
            config = replace(config, memory=capture)
        self.config = config
        self.strategy: Strategy = make_strategy(strategy_name, config)
        # Shapes are noted in the first iteration only, outside the strategy's ranges.
        self.shapes = ShapeRecorder(self.strategy) if record_shapes else None
        call = self.shapes.call if self.shapes is not None else self.strategy.call
        layout = compiled.layout if compiled is not None else None
        self.patcher = ForwardPatcher(
            model,
            plan.selected_paths(),
            call,
            reset_modes=reset_modes,
            skip=layout.inside if layout else frozenset(),
            call_impl=layout.call_impl if layout else frozenset(),
        )
        self.started_at = ""
        self.seconds = 0.0
        self.step_us = 0.0  # wall time of the last iteration's step (what an auto warm-up judges)
        self.watch = LoadWatch()  # other work on the machine, sampled between iterations
        self.threads = torch.get_num_threads()
        self._clock = 0.0

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
        self.watch.sample()
        self.strategy.begin()

    def patch(self) -> None:
        self.patcher.patch()

    def restore(self) -> None:
        self.patcher.restore()

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
                start = time.perf_counter()
                step()
                self.step_us = (time.perf_counter() - start) * 1e6
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
        self.strategy.end()

    def build_session(
        self, measures: MeasureTable | Sequence[IterationMeasure], facts: RunFacts
    ) -> ProfileSession:
        """The session of `measures`; what was measured and when it started come from here."""
        table = as_table(measures)
        said = self.thread_warning()
        facts = replace(
            facts,
            warnings=facts.warnings + ((said,) if said else ()) + self.patcher.patch_warnings(),
            profile_memory=self.config.profile_memory,
            use_device=self.config.use_device,
            backward=self.config.backward,
            started_at=self.started_at,
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


def run(
    model: nn.Module,
    inputs: Any,
    plan: ProfilePlan,
    opts: RunOptions,
    *,
    warnings: Sequence[str] = (),
    progress: ProgressFn | None = None,
    step: StepFn | None = None,
) -> ProfileSession:
    """Warm-up and measured iterations of `model` on `inputs` under a checked `plan`.

    The inputs move to `opts.device`, and so does the model for the run if it is elsewhere (it is
    moved back after); without a device, to the model's own device. The model is left exactly as it
    was. `warnings` (from checking the plan) go into the session.
    """
    rule = opts.check()
    if opts.backward and not torch.is_grad_enabled():
        raise UsageError(
            "backward=True inside torch.no_grad() or torch.inference_mode(): gradients are off, "
            "so there is no backward to profile; call profile() outside that block"
        )
    device = resolve_device(opts.device) or model_device(model)
    model_inputs = as_model_inputs(inputs, "the inputs")
    if device is not None:
        model_inputs = to_device(model_inputs, device)
    strategy_name = opts.strategy or plan.strategy or DEFAULT_STRATEGY
    if opts.backward:
        check_backward(strategy_name)
    loop = _RunLoop(model, model_inputs, plan, strategy_name, opts, rule, device, progress, step)
    with placed_on(model, device), torch_threads(opts.threads):
        session = loop.execute(list(warnings))
        return with_work(session, model, model_inputs, opts) if opts.flops else session


@dataclass
class _RunLoop:
    """One `run()` call's state: kept together so the steps stay small functions."""

    model: nn.Module
    inputs: ModelInputs
    plan: ProfilePlan
    strategy_name: str
    opts: RunOptions
    rule: IterationRule
    device: torch.device | None
    progress: ProgressFn | None
    step: StepFn | None = None
    compiled: CompiledRun | None = None  # the model's compiled parts, if any
    measures: MeasureTable = field(default_factory=MeasureTable)  # arrays, not objects: flat memory
    iteration_us: list[float] = field(default_factory=list)  # what `--iters auto` judges
    warmup_done: int = 0
    stop_reason: StopReason = "count"
    interrupted: bool = False
    started: float = 0.0

    def execute(self, warnings: list[str]) -> ProfileSession:
        opts = self.opts
        config = Driver.config_for(
            self.plan,
            self.device,
            profile_memory=opts.profile_memory,
            backward=opts.backward,
            trace_path=opts.trace_path,
        )
        by = "hybridprof" if opts.compiled_by_hybridprof else "user"
        compiled = self.compiled = compiled_run(self.model, self.strategy_name, compiled_by=by)
        if compiled is not None:
            config = replace(config, compiled=compiled)
            compiled.grad_enabled = opts.backward or (
                self.step is not None and torch.is_grad_enabled()
            )
        driver = Driver(
            self.model,
            self.plan,
            self.strategy_name,
            config,
            record_shapes=True,
            inputs=self.inputs,
            compiled=compiled,
        )
        start = time.perf_counter()
        with (
            random_state_kept(self.device),
            model_state_kept(self.model, training=opts.backward),
            _patched(driver),
            _trace_removed_on_failure(opts.trace_path),
            compiled.instrumented() if compiled is not None else contextlib.nullcontext(),
        ):
            self._iterate(driver)
        if self.interrupted:
            asked = "" if opts.iters == AUTO else f" of {opts.iters}"
            warnings.append(f"interrupted after {len(self.measures)}{asked} measured iterations")
        elif opts.iters == AUTO and (
            short := unconverged(self.stop_reason, self.rule, self.iteration_us)
        ):
            warnings.append(short)
        facts = RunFacts(
            environment=environment(self.device),
            warmup=self.warmup_done,
            requested_warmup=opts.warmup,
            requested_iterations=opts.iters,
            stop_reason=self.stop_reason,
            max_time_s=self.rule.max_time_s,
            interrupted=self.interrupted,
            warnings=tuple(warnings),
            command=opts.command,
            model_file=opts.model_file,
            model_hash=opts.model_hash,
            duration_s=round(time.perf_counter() - start, 3),
            trace_file=opts.trace_path,
        )
        session = driver.build_session(self.measures, facts)
        if compiled is not None:
            session = compiled.finish(session)
        nothing = never_ran_warning(session)
        return replace(session, warnings=session.warnings + ((nothing,) if nothing else ()))

    def _iterate(self, driver: Driver) -> None:
        step = self.step or (training_step if self.opts.backward else forward_once)

        compiled = self.compiled

        def one() -> None:
            if compiled is None:
                step(self.model, self.inputs)
                return
            with compiled.step_context():  # ranges for eager code inside compiled code
                step(self.model, self.inputs)

        driver.begin()
        self.started = time.perf_counter()
        try:
            with long_lived_frozen():
                self._warm_up(driver, one)
                self._measure(driver, one)
        except KeyboardInterrupt:
            if not self.measures:
                raise  # nothing measured yet: there is nothing worth saving
            self.interrupted = True
            self.stop_reason = "interrupted"
        finally:
            driver.end()

    def _warm_up(self, driver: Driver, one: Callable[[], None]) -> None:
        """Unmeasured iterations, as many as asked or (auto) until their times stop falling."""
        times: list[float] = []
        total = self.rule.warmup_total()
        self._report("warmup", 0, total)
        compiled, extra = self.compiled, 0
        while not self.rule.warmup_done(times, self._elapsed()) or (
            compiled is not None  # compiled code: warm until an iteration compiles nothing
            and (not times or compiled.compiled_last)
            and (extra := extra + 1) <= EXTRA_WARMUP
        ):
            before = compiled.snapshot() if compiled is not None else None
            driver.iteration(one, warmup=True)
            if compiled is not None and before is not None:
                compiled.warm_iteration_done(before)
            times.append(driver.step_us)
            self._report("warmup", len(times), total)
        self.warmup_done = len(times)
        if compiled is not None:
            compiled.warmup_done(self.plan.selected_paths())

    def _measure(self, driver: Driver, one: Callable[[], None]) -> None:
        """Measured iterations until the rule says stop (count reached, converged, time out)."""
        total = self.rule.iters_total()
        self._report("measure", 0, total)
        while (reason := self.rule.stop_reason(self.iteration_us, self._elapsed())) is None:
            if self.compiled is not None:
                self.compiled.begin_iteration()
            measure = driver.iteration(one, warm=self.opts.warm_step)
            if self.compiled is not None and self.compiled.recompiled() is not None:
                continue  # compile time is never a layer's: the iteration is left out
            self.measures.add(measure)
            self.iteration_us.append(measure.total_cpu_us or driver.step_us)
            self._report("measure", len(self.measures), total)
        self.stop_reason = reason

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _report(self, phase: str, done: int, total: int | None) -> None:
        if self.progress is not None and total != 0:
            self.progress(phase, done, total)


@contextlib.contextmanager
def long_lived_frozen() -> Iterator[None]:
    """The objects alive when the iterations start (the model, the plan, torch's own) are left
    out of the cyclic GC's scans until they end: between iterations a full collection walked all
    of them (a long pause every other iteration at 10,000 layers) to free an iteration's short-lived
    objects. Unfrozen afterwards: what became garbage meanwhile is collected then. A process that
    froze objects itself is left as it is (unfreezing would release its objects too)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _trace_removed_on_failure(trace_path: str | None) -> Iterator[None]:
    """A run that fails leaves no trace file behind (the strategy writes it when it ends)."""
    fresh = trace_path is not None and not os.path.exists(trace_path)
    try:
        yield
    except BaseException:
        if fresh and trace_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(trace_path)
        raise


@contextlib.contextmanager
def _patched(driver: Driver) -> Iterator[None]:
    """The driver's patches for the block, undone whatever happens (model state is kept outside)."""
    driver.patch()
    try:
        yield
    finally:
        driver.restore()


__all__ = ["Driver", "ProgressFn", "RunOptions", "run"]
