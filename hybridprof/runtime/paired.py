"""Two models measured in one process with their iterations interleaved: the paired A/B run of
`hybridprof diff --run`.

Two runs made one after the other differ as a whole and in part (caches, clock frequency, other
work on the machine), and no interval computed inside one run sees that. Here both models are
loaded side by side and their measured iterations alternate in ABBA order (base, new, new, base,
base, new, ...): pair i is base's and new's i-th measured iteration, taken back to back, and each
side runs first in half the pairs, so whatever drifts on the machine hits both sides of a pair
alike and a linear drift cancels over two pairs. `hybridprof.diff.paired` then judges each layer on
its per-pair ratios.

Each side is a `Driver` of its own (its plan, strategy, patches and load watch); the session
strategy opens one profiler session per iteration, so the two never overlap. Warm-up iterations
alternate too, until both sides' warm-up rules are met. With `iters="auto"` the pairs go on until
the caller's `settled` test says every paired interval is narrow enough, or the time limit (or the
iteration cap) is reached; the test is asked after 10 pairs and then each time the count has grown
by half, so its cost stays a small share of the run. Both models are restored exactly, whatever
happens; Ctrl-C after the first pair keeps the pairs done (both sessions marked interrupted).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession, StopReason
from hybridprof.files.loader import ModelInputs, as_model_inputs
from hybridprof.runtime.driver import Driver, ProgressFn, RunOptions, long_lived_frozen
from hybridprof.runtime.measures.aggregate import RunFacts, environment, never_ran_warning
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.measures.table import MeasureTable
from hybridprof.runtime.model_state import model_state_kept, random_state_kept
from hybridprof.runtime.stopping import AUTO, AUTO_MAX_ITERATIONS, IterationRule
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, check_backward
from hybridprof.runtime.workload import (
    forward_once,
    model_device,
    placed_on,
    resolve_device,
    to_device,
    torch_threads,
    training_step,
)

FIRST_CHECK_PAIRS = 10  # `settled` is first asked after this many pairs (intervals need 6 or more)
CHECK_GROWTH = 1.5  # then each time the pairs have grown by half
ORDER = "ABBA"

# Both sessions as measured so far -> is every paired interval narrow enough to stop?
SettledFn = Callable[[ProfileSession, ProfileSession], bool]


@dataclass(frozen=True, slots=True)
class Side:
    """One of the two models of a paired run, with its inputs, its plan and its file."""

    model: nn.Module
    inputs: Any
    plan: ProfilePlan
    model_file: str | None = None
    model_hash: str | None = None


@dataclass
class _Lane:
    """One side's state during the run."""

    side: Side
    inputs: ModelInputs
    device: torch.device | None
    driver: Driver
    measures: MeasureTable = field(default_factory=MeasureTable)
    warmup_times: list[float] = field(default_factory=list)

    def step(self, backward: bool) -> Callable[[], None]:
        do = training_step if backward else forward_once
        model, inputs = self.side.model, self.inputs

        def one() -> None:
            do(model, inputs)

        return one


def run_paired(
    base: Side,
    new: Side,
    opts: RunOptions,
    *,
    settled: SettledFn | None = None,
    progress: ProgressFn | None = None,
) -> tuple[ProfileSession, ProfileSession]:
    """Warm up and measure `base` and `new` in alternation (ABBA); their two sessions, whose
    i-th measured iterations were taken back to back. `opts.iters` counts pairs; with "auto" the
    run stops once `settled` (both sessions so far) is true, or at the time limit."""
    rule = opts.check()
    strategy = opts.strategy or base.plan.strategy or DEFAULT_STRATEGY
    if opts.backward:
        check_backward(strategy)
    lanes = [_lane(side, opts, strategy) for side in (base, new)]
    loop = _PairedLoop(lanes, opts, rule, settled, progress)
    with torch_threads(opts.threads), random_state_kept(lanes[0].device):
        with _kept(lanes, opts):
            loop.iterate()
        return loop.sessions()  # under the run's threads: the sessions record them


def _lane(side: Side, opts: RunOptions, strategy: str) -> _Lane:
    device = resolve_device(opts.device) or model_device(side.model)
    inputs = as_model_inputs(side.inputs, "the inputs")
    if device is not None:
        inputs = to_device(inputs, device)
    config = Driver.config_for(
        side.plan, device, profile_memory=opts.profile_memory, backward=opts.backward
    )
    driver = Driver(side.model, side.plan, strategy, config, record_shapes=True)
    return _Lane(side, inputs, device, driver)


@contextlib.contextmanager
def _kept(lanes: list[_Lane], opts: RunOptions) -> Iterator[None]:
    """Both models on their devices, in their run state and patched for the block; each put back
    exactly as it was afterwards, whatever happens."""
    with contextlib.ExitStack() as stack:
        for lane in lanes:
            stack.enter_context(placed_on(lane.side.model, lane.device))
            stack.enter_context(model_state_kept(lane.side.model, training=opts.backward))
        for lane in lanes:
            lane.driver.patch()
            stack.callback(lane.driver.restore)
        yield


@dataclass
class _PairedLoop:
    lanes: list[_Lane]
    opts: RunOptions
    rule: IterationRule
    settled: SettledFn | None
    progress: ProgressFn | None
    stop_reason: StopReason = "count"
    interrupted: bool = False
    started: float = 0.0
    duration_s: float = 0.0

    def iterate(self) -> None:
        self.started = time.perf_counter()
        begun: list[Driver] = []
        try:
            for lane in self.lanes:
                lane.driver.begin()
                begun.append(lane.driver)
            with long_lived_frozen():
                self._warm_up()
                self._measure()
        except KeyboardInterrupt:
            if not len(self.lanes[1].measures):
                raise  # not one pair measured: nothing worth comparing
            self.interrupted = True
            self.stop_reason = "interrupted"
        finally:
            for driver in begun:
                driver.end()
            self.duration_s = time.perf_counter() - self.started

    def _warm_up(self) -> None:
        """Unmeasured iterations of each side in turn, until both sides' warm-up rules are met."""
        total = self.rule.warmup_total()
        self._report("warmup", 0, total)
        while True:
            waiting = [
                lane
                for lane in self.lanes
                if not self.rule.warmup_done(lane.warmup_times, self._elapsed())
            ]
            if not waiting:
                return
            for lane in waiting:
                lane.driver.iteration(lane.step(self.opts.backward), warmup=True)
                lane.warmup_times.append(lane.driver.step_us)
            self._report("warmup", min(len(lane.warmup_times) for lane in self.lanes), total)

    def _measure(self) -> None:
        """Pairs in ABBA order until the count, `settled`, the time limit or the cap says stop."""
        total = self.rule.iters_total()
        self._report("measure", 0, total)
        check_at = FIRST_CHECK_PAIRS
        while (reason := self._stop_reason()) is None:
            pair = len(self.lanes[1].measures)
            order = self.lanes if pair % 2 == 0 else self.lanes[::-1]
            # Kept only once both halves are done: Ctrl-C between them leaves whole pairs.
            done = [(lane, self._measured(lane)) for lane in order]
            for lane, measure in done:
                lane.measures.add(measure)
            self._report("measure", pair + 1, total)
            if pair + 1 >= check_at and self._auto():
                check_at = max(check_at + 1, round(check_at * CHECK_GROWTH))
                if self.settled is not None and self.settled(*self.sessions()):
                    reason = "converged"
                    break
        self.stop_reason = reason

    def _measured(self, lane: _Lane) -> IterationMeasure:
        return lane.driver.iteration(lane.step(self.opts.backward), warm=self.opts.warm_step)

    def _auto(self) -> bool:
        return self.rule.iters == AUTO

    def _stop_reason(self) -> StopReason | None:
        done = len(self.lanes[1].measures)
        if isinstance(self.rule.iters, int) and done >= self.rule.iters:
            return "count"
        if self._auto() and done >= AUTO_MAX_ITERATIONS:
            return "max_iterations"
        limit = self.rule.max_time_s
        if done >= 1 and limit is not None and self._elapsed() >= limit:
            return "max_time"
        return None

    def sessions(self) -> tuple[ProfileSession, ProfileSession]:
        """Both sessions of the iterations measured so far."""
        base, new = (self._session(lane) for lane in self.lanes)
        return base, new

    def _session(self, lane: _Lane) -> ProfileSession:
        opts = self.opts
        warnings = []
        if self.interrupted:
            warnings.append(f"interrupted after {len(lane.measures)} measured pairs")
        facts = RunFacts(
            environment=environment(lane.device),
            warmup=len(lane.warmup_times),
            requested_warmup=opts.warmup,
            requested_iterations=opts.iters,
            stop_reason=self.stop_reason,
            max_time_s=self.rule.max_time_s,
            interrupted=self.interrupted,
            warnings=tuple(warnings),
            command=opts.command,
            model_file=lane.side.model_file,
            model_hash=lane.side.model_hash,
            duration_s=round(self.duration_s or self._elapsed(), 3),
        )
        session = lane.driver.build_session(lane.measures, facts)
        nothing = never_ran_warning(session)
        return replace(session, warnings=session.warnings + ((nothing,) if nothing else ()))

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _report(self, phase: str, done: int, total: int | None) -> None:
        if self.progress is not None and total != 0:
            self.progress(phase, done, total)


__all__ = ["ORDER", "SettledFn", "Side", "run_paired"]
