"""One model of a driven run, as the iteration loop drives it: a lane.

A lane holds the model's `Driver` (its strategy, patches and load watch), the step it repeats on its
inputs, its compiled parts if it has any, and what its iterations measured. The fixed run has one
lane; a paired run (`diff --run`, `--compare-eager`) has two, which `iteration_loop.py` measures in
ABBA order. What a lane does in one iteration is the same in every mode:

- a warm-up iteration runs the step unmeasured; with compiled code, warm-up goes on until an
  iteration compiles nothing (at most `EXTRA_WARMUP` more), and then the kernel map is made;
- a measured iteration runs the step under the strategy; one in which compiled code compiled again
  is left out (compile time is never a layer's), and said in the session with the guard that
  failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.files.loader import ModelInputs, as_model_inputs
from hybridprof.runtime.basics.workload import (
    forward_once,
    model_device,
    resolve_device,
    to_device,
    training_step,
)
from hybridprof.runtime.compiled.compiled_run import EXTRA_WARMUP, CompiledRun, compiled_run
from hybridprof.runtime.measures.aggregate import RunFacts, never_ran_warning
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.measures.measure_table import MeasureTable
from hybridprof.runtime.runs.driver import Driver
from hybridprof.runtime.runs.options import RunOptions, StepFn


@dataclass
class Lane:
    """One model's state during a driven run (see the module docstring)."""

    driver: Driver
    inputs: ModelInputs
    device: torch.device | None
    step: StepFn
    compiled: CompiledRun | None = None
    model_file: str | None = None
    model_hash: str | None = None
    # Patched only around its own iterations: set when another lane shares its modules (an eager
    # model beside its torch.compile wrapper), whose patches must be gone while that one runs.
    patch_each_iteration: bool = False
    measures: MeasureTable = field(default_factory=MeasureTable)  # arrays, not objects: flat memory
    warmup_us: list[float] = field(default_factory=list)  # each warm-up iteration's step
    iteration_us: list[float] = field(default_factory=list)  # each measured one (auto judges it)
    wait_us: list[float | None] = field(default_factory=list)  # each kept one's wait for a CPU
    _extra_warmup: int = 0

    @property
    def model(self) -> nn.Module:
        return self.driver.model

    def run_step(self) -> None:
        """The step on the lane's inputs; compiled code runs it in its step context (ranges for
        eager code inside compiled code)."""
        if self.compiled is None:
            self.step(self.model, self.inputs)
            return
        with self.compiled.step_context():
            self.step(self.model, self.inputs)

    def warmed_up(self, warmup_done: Callable[[list[float]], bool]) -> bool:
        """Is the lane's warm-up over: the rule's (`warmup_done` of its warm-up times) and, with
        compiled code, an iteration that compiled nothing (or `EXTRA_WARMUP` more)."""
        if not warmup_done(self.warmup_us):
            return False
        compiled = self.compiled
        if compiled is None or (self.warmup_us and not compiled.compiled_last):
            return True
        self._extra_warmup += 1  # asked once per warm-up iteration it then runs
        return self._extra_warmup > EXTRA_WARMUP

    def warm_up_once(self) -> None:
        compiled = self.compiled
        before = compiled.snapshot() if compiled is not None else None
        self._iteration(warmup=True)
        if compiled is not None and before is not None:
            compiled.warm_iteration_done(before)
        self.warmup_us.append(self.driver.step_us)

    @property
    def times_bare_steps(self) -> bool:
        """Whether its step is timed bare (`Driver.time_bare_steps`): not where it is patched only
        around its own iterations (another lane shares its modules)."""
        return self.driver.times_bare_steps and not self.patch_each_iteration

    def time_bare_steps(self, count: int) -> None:
        self.driver.time_bare_steps(self.run_step, count)

    def warm_up_done(self) -> None:
        """After the last warm-up iteration: compiled code's kernel map and facts."""
        if self.compiled is not None:
            self.compiled.warmup_done(self.driver.plan.selected_paths())

    def measure_once(self, warm_step: bool) -> IterationMeasure | None:
        """One measured iteration; None when compiled code compiled again in it."""
        if self.compiled is not None:
            self.compiled.begin_iteration()
        measure = self._iteration(warm=warm_step)
        if self.compiled is not None and self.compiled.recompiled() is not None:
            return None
        return measure

    def forget_breakdown(self) -> None:
        """The iteration broken down was left out: the next measured one is broken down."""
        capture = self.driver.config.memory
        if capture is not None:
            capture.forget_breakdown()

    def keep(self, measure: IterationMeasure) -> None:
        self.measures.add(measure)
        self.iteration_us.append(measure.total_cpu_us or self.driver.step_us)
        self.wait_us.append(self.driver.step_wait_us)

    def session(self, facts: RunFacts) -> ProfileSession:
        """The session of the iterations measured so far, with the run's `facts`."""
        session = self.driver.build_session(self.measures, facts)
        if self.compiled is not None:
            session = self.compiled.finish(session)
        nothing = never_ran_warning(session)
        return replace(session, warnings=session.warnings + ((nothing,) if nothing else ()))

    def _iteration(self, **how: bool) -> IterationMeasure:
        if not self.patch_each_iteration:
            return self.driver.iteration(self.run_step, **how)
        self.driver.patch()
        try:
            return self.driver.iteration(self.run_step, **how)
        finally:
            self.driver.restore()


@dataclass(frozen=True, slots=True)
class LaneModel:
    """What a lane is made of: a model with its inputs and plan, and the file it came from."""

    model: nn.Module
    inputs: Any
    plan: ProfilePlan
    model_file: str | None = None
    model_hash: str | None = None
    step: StepFn | None = None  # None: a training step with backward, else a forward
    trace: bool = False  # write the run's trace (opts.trace_path): a fixed run's one lane only


def make_lane(given: LaneModel, opts: RunOptions, strategy: str) -> Lane:
    """The lane of `given` for a run under `opts`: its inputs moved to its device (the run's, or
    the model's own), its compiled parts found (a strategy that cannot see into them is refused
    here) and its driver made."""
    device = resolve_device(opts.device) or model_device(given.model)
    inputs = as_model_inputs(given.inputs, "the inputs")
    if device is not None:
        inputs = to_device(inputs, device)
    config = Driver.config_for(
        given.plan,
        device,
        profile_memory=opts.profile_memory,
        backward=opts.backward,
        trace_path=opts.trace_path if given.trace else None,
    )
    compiled = compiled_run(given.model, strategy, compiled_by=opts.compiled_by)
    if compiled is not None:
        config = replace(config, compiled=compiled)
        # the grad mode its forward runs in, which dynamo guards on
        compiled.grad_enabled = opts.backward or (
            given.step is not None and torch.is_grad_enabled()
        )
    driver = Driver(
        given.model,
        given.plan,
        strategy,
        config,
        record_shapes=True,
        inputs=inputs,
        compiled=compiled,
    )
    step = given.step or (training_step if opts.backward else forward_once)
    return Lane(driver, inputs, device, step, compiled, given.model_file, given.model_hash)


def shared_modules(lanes: list[Lane]) -> bool:
    """Do two lanes run some of the same module objects (a model beside its compiled wrapper)?"""
    seen: set[int] = set()
    for lane in lanes:
        ids = {id(m) for m in lane.model.modules()}
        if ids & seen:
            return True
        seen |= ids
    return False


__all__ = ["Lane", "LaneModel", "make_lane", "shared_modules"]
