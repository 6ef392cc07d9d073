"""The steps of a with-block around the user's own loop: which are measured, and what runs when.

The third way a run's iterations come (beside the fixed and the paired runs of
`iteration_loop.py`): here the user's code runs each step and says where it ends, so hybridprof
never runs the model; it only brackets the steps the schedule picks, on the `Driver` of the
block's run (`with_block.py`).

    with hybridprof.Profile(model, schedule=hybridprof.schedule(wait=2, warmup=3, active=10)) as p:
        for batch in data:
            train_step(batch)
            p.step()             # ends one step, begins the next

Steps are numbered from 0 by `end_step()` calls (`prof.step()` is `end_step()` then
`begin_step()`); the schedule says what each does. A window is a run of warm-up and active steps:
when one begins, the cyclic GC runs once and then waits, the selected layers' forwards are patched,
the optimizer's ranges installed (`training/hooks.py`) and one profiler session started; when it
ends (the next step is not profiled, or a new cycle's warm-up begins), all of that is undone, and
the GC resumes. Outside windows nothing of hybridprof's is installed: a step there runs the model's
own code, and `prof.step()` is a counter and a schedule lookup (~1 us).

Each step of a window is a range (`events/steps.py` cuts the session's events by them), so what
ran between `end_step()` and the next `begin_step()` (data loading, logging, evaluation in an
integration) belongs to no step. A window's events are worked out when it ends, into the measure
table, and the profiler is dropped, so memory stays flat in the number of steps; a window of more
than `steps_per_session` active steps restarts its profiler session that often (a session's
events cost ~2 KB each until it stops). The first window of a block without `step()` calls is
the whole block: its result stays unread until something reads it, as a forward-only block's
always was (`str(prof)` then reads only the layer ranges).

Strategies that attribute no backward (`per-call`, `timer`) measure each step as an iteration of
their own, forward only.
"""

from __future__ import annotations

import gc
import time
from contextlib import AbstractContextManager
from typing import Any

import torch

from hybridprof.runtime.basics.stopping import AUTO_MAX_ITERATIONS
from hybridprof.runtime.events.training_names import STEP_RANGE, WARMUP_RANGE
from hybridprof.runtime.measures.measure_table import MeasureTable
from hybridprof.runtime.runs.driver import Driver
from hybridprof.runtime.runs.guards import block_closed, block_opened
from hybridprof.runtime.strategies import spec_of
from hybridprof.runtime.strategies.base import IterationResult
from hybridprof.runtime.strategies.ranges import range_factory
from hybridprof.runtime.strategies.session_strategy import StoppedIteration
from hybridprof.runtime.training.hooks import TrainingHooks
from hybridprof.runtime.training.schedule import Action, Schedule

# How many steps a session keeps at most, as `--iters auto` does: a block without a schedule
# around a loop of many thousand steps measures this many and lets the others run untouched.
MAX_MEASURED_STEPS = AUTO_MAX_ITERATIONS
STEPS_PER_SESSION = 10


class UserSteps:
    """The steps of one with-block (see the module docstring)."""

    def __init__(
        self,
        driver: Driver,
        schedule: Schedule,
        steps_per_session: int = STEPS_PER_SESSION,
        *,
        training_hooks: bool = True,
    ) -> None:
        """training_hooks: install the optimizer's, clipping's and GradScaler's ranges in each
        window (not for a compiled step, which traces what they patch)."""
        self.driver = driver
        self.schedule = schedule
        # With per-layer memory a session holds one measured step: the memory capture's records
        # (saved tensors, what was alive at the start) are a session's, and are a step's then.
        self._memory = driver.config.profile_memory and driver.config.memory is not None
        self.steps_per_session = 1 if self._memory else steps_per_session
        self.measures = MeasureTable()
        self.steps = 0  # steps ended: the number of the current one
        self.warmup_steps = 0  # warm-up steps run under the profiler
        self.step_walls_us: list[float] = []  # each measured step's wall time
        self.unmeasured = 0  # steps the schedule asked for beyond MAX_MEASURED_STEPS
        self.skipped_steps = 0  # steps not measured: another profiler was running
        self.hooks = TrainingHooks(range_factory(driver.config.compat.fast_ranges))
        self._training_hooks = training_hooks
        self._windowed = spec_of(driver.strategy_name).backward  # one profiler per window
        self._make_range = self.hooks.make_range
        self._window = False
        self._gc_was_enabled = False
        self._in_session = 0  # measured steps in the running profiler session
        self._kind: Action = "none"  # the open step's
        self._range: AbstractContextManager[Any] | None = None
        self._started = 0.0
        self._lazy: IterationResult | None = None  # the whole block, read when asked
        self.first_window: StoppedIteration | None = None  # kept for raw(), when asked to
        self._drop_tail = False  # the block failed: its unfinished last step is not measured

    # -- the steps

    def begin(self) -> None:
        """The block begins (its first step with it)."""
        block_opened(id(self), f"counting the steps of {type(self.driver.model).__name__}")
        self.begin_step()

    def begin_step(self) -> None:
        """Begin the current step (a no-op while one is open: Lightning begins at each batch)."""
        if self._kind != "none":
            return
        kind = self.schedule.action(self.steps)
        if kind == "none":
            return
        if not self._room():
            self.unmeasured += kind == "active"
            return
        if not self._window and not self._open_window():
            return
        self._kind = kind
        if self._windowed:
            self._range = self._make_range(STEP_RANGE if kind == "active" else WARMUP_RANGE)
            self._range.__enter__()
        else:
            self.driver.strategy.begin_iteration(warmup=kind == "warmup")
        self._started = time.perf_counter()

    def end_step(self) -> None:
        """End the current step; close the window when the next step is not one of it."""
        kind, self._kind = self._kind, "none"
        if kind != "none":
            self._close_step(kind)
        self.steps += 1
        if self._window:
            following = self.schedule.action(self.steps)
            if following == "none" or (kind == "active" and following == "warmup"):
                self._close_window()
            elif following == "active" and (
                self._in_session >= self.steps_per_session or (self._memory and kind == "warmup")
            ):
                self._restart_session()
            elif not self._room():
                self._close_window()

    def finish(self, failed: bool = False) -> IterationResult | None:
        """The block ends: close its open step and window. Returns the block's result, unread,
        when it had no steps (`step()` never called); else everything is in `measures`. The
        step a failure interrupted is no measured step (the block without steps keeps it)."""
        try:
            kind, self._kind = self._kind, "none"
            lazy, tail = self.steps == 0, kind == "active" and self.steps > 0
            self._drop_tail = failed
            if kind != "none":
                self._close_step(kind, lazy=lazy, tail=tail)
            if self._window:
                self._close_window(lazy=lazy, tail=tail)
        finally:
            block_closed(id(self))
            self.driver.mark_end()
        return self._lazy

    # -- helpers

    def _room(self) -> bool:
        """Fewer steps measured than a session keeps at most."""
        return len(self.measures) + self._in_session < MAX_MEASURED_STEPS

    def _close_step(self, kind: Action, lazy: bool = False, tail: bool = False) -> None:
        """Close the open step. `lazy`: the block's only step, whose result stays unread; `tail`:
        the step after the last `step()`, kept only if a layer ran in it."""
        wall_us = (time.perf_counter() - self._started) * 1e6
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        if kind == "warmup":
            self.warmup_steps += 1
        else:
            self.step_walls_us.append(wall_us)
        if self._windowed:
            self._in_session += kind == "active"
        elif lazy:
            self._lazy = self.driver.strategy.stop_iteration()
        else:
            measure = self.driver.strategy.end_iteration(warmup=kind == "warmup")
            if kind == "active" and not (tail and (self._drop_tail or not measure.paths)):
                self.measures.add(measure)
            elif kind == "active":
                self.step_walls_us.pop()

    def _open_window(self) -> bool:
        if self._windowed and torch.autograd._profiler_enabled():
            self.skipped_steps += 1  # the user's own profiler: ours cannot nest in it
            return False
        if self.steps:  # mid-loop: collect now, so that no collection lands in the window
            gc.collect()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        driver = self.driver
        driver.watch.sample()
        try:
            driver.patch()
            if self._training_hooks:
                self.hooks.install()
            if self._windowed:
                driver.strategy.begin_iteration()
        except BaseException:
            self._undo_window()
            raise
        self._window = True
        return True

    def _restart_session(self) -> None:
        """A new profiler session for the next measured steps (the last one's are folded)."""
        stopped = self.driver.strategy.stop_iteration()
        self._fold(stopped)
        self.driver.strategy.begin_iteration()

    def _close_window(self, lazy: bool = False, tail: bool = False) -> None:
        stopped = self.driver.strategy.stop_iteration() if self._windowed else None
        self._undo_window()
        self._window = False
        if lazy and stopped is not None:
            self._lazy = stopped
            self._in_session = 0
        else:
            self._fold(stopped, tail)
        self.driver.watch.sample()

    def _undo_window(self) -> None:
        try:
            self.hooks.uninstall()
        finally:
            try:
                self.driver.restore()
            finally:
                if self._gc_was_enabled:
                    gc.enable()

    def _fold(self, stopped: IterationResult | None, tail: bool = False) -> None:
        """The session's measured steps into the table; a tail step (after the last `step()`)
        only if a layer or the optimizer ran in it (usually it is only the loop's exit)."""
        self._in_session = 0
        if not isinstance(stopped, StoppedIteration):
            return
        first = self.first_window is None
        measures = stopped.step_measures(keep_raw=first)
        last = measures[-1] if measures else None
        if tail and last and (self._drop_tail or not (last.paths or last.optimizer)):
            measures.pop()
            self.step_walls_us.pop()
        for measure in measures:
            self.measures.add(measure)
        if first and self.driver.config.keep_raw_events:
            self.first_window = stopped


__all__ = ["MAX_MEASURED_STEPS", "STEPS_PER_SESSION", "UserSteps"]
