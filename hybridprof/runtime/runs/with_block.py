"""A `Profile` with-block as a run: its driver, its steps, its compiled parts, and its session.

The library's `Profile` (`api/profiler.py`) is torchprof's face over this: it says when the block
begins and ends, and asks for the session, the layer table or torchprof's raw events. What runs in
between is the user's code; the steps it marks (`prof.step()`) are bracketed by `UserSteps`
(`user_steps.py`). The driver is made with the user's train/eval modes left as they are (the
user's code may change them in the block), and, for compiled code, with the kernels mapped by a
compile inside the block (the compile hooks are in from `begin()` to `end()`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.runtime.basics.quiet import quiet_fd2
from hybridprof.runtime.basics.workload import resolve_device
from hybridprof.runtime.compiled import dynamo_facts
from hybridprof.runtime.compiled.compiled_run import compiled_run
from hybridprof.runtime.compiled.compiled_step import compiled_step_of
from hybridprof.runtime.compiled.detect import compiled_wrapper_of
from hybridprof.runtime.distributed.rank import block_rank
from hybridprof.runtime.measures.aggregate import RunFacts, environment
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.measures.measure_table import MeasureTable
from hybridprof.runtime.runs.block_notes import (
    block_warnings,
    changed_modules_warning,
    grads_state,
    module_ids,
)
from hybridprof.runtime.runs.driver import Driver
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION, UserSteps
from hybridprof.runtime.strategies import spec_of
from hybridprof.runtime.strategies.base import IterationResult
from hybridprof.runtime.training.schedule import EVERY_STEP, Schedule


@dataclass(frozen=True, slots=True)
class BlockOptions:
    """What a with-block measures, as `Profile` was asked."""

    strategy: str
    use_cuda: bool = False
    profile_memory: bool = False
    schedule: Schedule | None = None  # None: every step measured
    steps_per_session: int = STEPS_PER_SESSION
    optimizers: Sequence[Any] = ()  # their state is told apart with profile_memory


# A wrapper that is kept but no longer called: the model ran eagerly, through no patched module.
WRAPPER_NOT_CALLED = (
    "the model has a torch.compile wrapper (compiled = torch.compile(model)), so the block "
    "measured what runs through it, and no layer ran there: if the loop called the model itself, "
    "delete the wrapper before the block (del compiled) to profile the eager model, or call the "
    "wrapper"
)
# A compiled step that names the model but was not called in the block.
STEP_NOT_CALLED = (
    "{name}() is a torch.compile'd function calling the model, so the block measured what runs "
    "through it and patched no layer, and no layer ran there: if the loop called the model "
    "outside {name}(), profile that loop without {name} alive (del {name}), or call it in the "
    "block"
)


class BlockRun:
    """One with-block's run (see the module docstring)."""

    def __init__(self, model: nn.Module, plan: ProfilePlan, options: BlockOptions) -> None:
        self.options = options
        device = None
        if options.use_cuda:
            device = resolve_device("cuda", asked_as="use_cuda=True", fix="use_cuda=False")
        config = Driver.config_for(
            plan, device, profile_memory=options.profile_memory, keep_raw_events=True, training=True
        )
        self._dynamo = dynamo_facts.snapshot()  # a compiled caller is seen by what dynamo did
        # A caller's compiled wrapper around the model is what runs: its compiled code is mapped
        # as if the wrapper were profiled, and the modules inside it are never patched (dynamo
        # guards on them: a patch would make the wrapper compile again inside the block).
        wrapper = compiled_wrapper_of(model)
        self._through_wrapper = wrapper is not None
        # A compiled function that calls the model (a compiled train step) likewise: its kernels
        # are mapped, and nothing it traces is patched (the model's modules, the optimizer).
        step = compiled_step_of(model) if wrapper is None else None
        self._step_name = step.name if step is not None else None
        self.compiled = compiled_run(
            wrapper if wrapper is not None else model, options.strategy, step=step
        )
        del wrapper, step  # held by the compiled run alone, until the block ends
        if self.compiled is not None:  # kernels of compiled code, mapped by a compile in the block
            config = replace(config, compiled=self.compiled)
        self.driver = Driver(
            model,
            plan,
            options.strategy,
            config,
            reset_modes=False,
            optimizers=options.optimizers,
            compiled=self.compiled,
        )
        # Without profiler events, whether a backward ran is seen by the gradients it changed.
        backward_seen = spec_of(options.strategy).backward
        self._grads = None if backward_seen else grads_state(model)
        self._modules = module_ids(model)  # a child added or replaced in the block is said
        schedule = options.schedule or EVERY_STEP
        # The optimizer's hooks and ranges are patches of torch.optim and nn.Module, which a
        # compiled step traces: left out there (its optimizer kernels are mapped instead).
        self.steps = UserSteps(
            self.driver,
            schedule,
            options.steps_per_session,
            training_hooks=self._step_name is None,
        )
        self.result: IterationResult | None = None  # a block without steps: read when asked
        self.said: tuple[str, ...] = ()  # what the block's steps must say, known when it ends
        self._hooked = contextlib.ExitStack()

    def begin(self) -> None:
        """The block begins: the compile hooks, the driver, and the first window of steps (the
        cyclic GC waits while it is open)."""
        if self.compiled is not None:
            self._hooked.enter_context(self.compiled.instrumented())
        with quiet_fd2():
            self.driver.begin()
        try:
            self.steps.begin()
        except BaseException:
            self._close(failed=True)
            raise

    def end(self, failed: bool) -> tuple[str, ...]:
        """The block ends (`failed`: by an exception): its steps closed, keeping what was measured
        but never masking the error; what to warn the user about."""
        try:
            self._close(failed)
        finally:
            if self.compiled is not None:
                self.compiled.warmup_done(self.driver.plan.selected_paths())
                self.compiled.keep_only(self.driver.model)
        changed = changed_modules_warning(self._modules, self.driver.model)
        self.said = block_warnings(self.steps, self._grads, self.driver.model) + (
            (changed,) if changed else ()
        )
        return tuple(said for said in (self.driver.thread_warning(), *self.said) if said)

    def _close(self, failed: bool) -> None:
        self._hooked.close()  # the compile settings back as they were
        try:  # the open step's range closes first: nothing of hybridprof's lands in it
            self.result = self.steps.finish(failed)  # worked out when first read
        except Exception:
            if not failed:
                raise
        finally:
            with quiet_fd2():
                self.driver.end()

    # -- results

    def measured(self) -> bool:
        return self.result is not None or bool(len(self.steps.measures))

    def measures(self) -> MeasureTable | Sequence[IterationMeasure]:
        """What the block measured: its one iteration (a block without steps), else its steps."""
        if self.result is not None:
            return [self.result.measure()]
        if not len(self.steps.measures):
            raise RuntimeError(
                f"nothing was measured: the block ended after {self.steps.steps} steps, before "
                "its schedule's first active step; call prof.step() after each step, or give a "
                "schedule whose steps the loop reaches"
            )
        return self.steps.measures

    def session(self, measures: MeasureTable | Sequence[IterationMeasure]) -> ProfileSession:
        """The session of `measures` (the block's, or its layer ranges alone)."""
        steps, schedule = self.steps, self.options.schedule
        facts = RunFacts(
            environment=environment("cuda" if self.options.use_cuda else None),
            duration_s=round(self.driver.seconds, 3),
            warmup=steps.warmup_steps,
            warnings=self.said,
            steps=steps.steps,
            schedule=schedule.info() if schedule is not None else None,
        )
        session = self.driver.build_session(measures, facts)
        rank = block_rank(self.driver.model, self.options.use_cuda, session)
        session = replace(session, rank=rank) if rank is not None else session
        if self._through_wrapper and not session.records:  # no compiled code ran either
            return replace(session, warnings=(WRAPPER_NOT_CALLED, *session.warnings))
        if self._step_name is not None and not session.records:
            unused = STEP_NOT_CALLED.format(name=self._step_name)
            return replace(session, warnings=(unused, *session.warnings))
        if self.compiled is not None:
            return self.compiled.finish(session)
        said = dynamo_facts.compiled_caller_warning(self._dynamo)
        return replace(session, warnings=(*session.warnings, said)) if said else session

    def raw_events(self) -> dict[str, list[Any]]:
        """A block without steps: its calls; with steps, those of its first profiler session's
        measured steps (or every step's, under a strategy that measures as it goes)."""
        if self.result is not None:
            return self.result.raw_events()
        if self.steps.first_window is not None:
            return self.steps.first_window.raw_events()
        if len(self.steps.measures):
            return self.driver.strategy.raw_events()
        return {}


__all__ = ["BlockOptions", "BlockRun"]
