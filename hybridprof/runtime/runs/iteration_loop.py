"""The one loop that drives a run's iterations: warm-up, then measured rounds, on one or two lanes.

Its modes are its parameters:

- one lane: the fixed run of `hybridprof.profile()` and `hybridprof run`. `warmup` unmeasured
  iterations (the first profiled steps of torch are far slower than the rest, and the profiler's
  start-up is paid there), then `iters` measured ones. Either count may be "auto", with a time
  limit (`basics/stopping.py` decides when each phase ends): the measured iterations go on until
  the median iteration time is known to ±3%.
- two lanes: a paired run, both models measured in one process with their iterations
  interleaved in ABBA order (A, B, B, A, A, B, ...): pair i is the two lanes' i-th measured
  iterations, taken back to back, and each lane runs first in half the pairs, so whatever drifts on
  the machine (caches, clock frequency, other work) hits both sides of a pair alike and a linear
  drift cancels over two pairs; `hybridprof.diff` then judges each figure on its per-pair ratios.
  Warm-up iterations alternate too, until both lanes' warm-up rules are met. With `iters="auto"`
  the pairs go on until the caller's `settled` test says every paired interval is narrow enough
  (asked after 10 pairs and then each time the count has grown by half, so its cost stays a small
  share of the run), or the time limit or the iteration cap is reached. `hybridprof diff --run`
  pairs two models; `--compare-eager` pairs the eager model with its compiled version
  (`speedup_run.py`), two lanes that share their modules and so are patched only around their own
  iterations.

A `Profile` with-block's steps are the third way iterations come (`with_block.py`,
`user_steps.py`): there the user's code runs each step and marks where it ends, so no loop of
hybridprof's runs them; they are bracketed on a `Driver` of the same kind, and their session is
built by the same `Driver.build_session`.

In every mode: the models are restored exactly, whatever happens; Ctrl-C after the first measured
iteration (the first whole pair) keeps what was measured and marks the sessions `interrupted`; a
model that raises becomes a `ModelRunError` naming the layer (`Driver.iteration`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from hybridprof.datamodel import CpuWaits, ProfileSession, StopReason
from hybridprof.errors import ModelRunError
from hybridprof.runtime.basics.model_state import model_state_kept, random_state_kept
from hybridprof.runtime.basics.stopping import AUTO, IterationRule, unconverged
from hybridprof.runtime.basics.workload import placed_on, torch_threads
from hybridprof.runtime.flops.counter import with_work
from hybridprof.runtime.measures.aggregate import RunFacts, environment
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.runs.driver import BARE_STEPS
from hybridprof.runtime.runs.lanes import Lane, shared_modules
from hybridprof.runtime.runs.options import ProgressFn, RunOptions
from hybridprof.runtime.runs.stolen_time import StolenTime, waits_line

FIRST_CHECK_PAIRS = 10  # `settled` is first asked after this many pairs (intervals need 6 or more)
CHECK_GROWTH = 1.5  # then each time the pairs have grown by half
ORDER = "ABBA"

# Both sessions as measured so far -> is every paired interval narrow enough to stop?
SettledFn = Callable[[ProfileSession, ProfileSession], bool]


@dataclass
class IterationLoop:
    """The iterations of one driven run over its lanes (see the module docstring)."""

    lanes: list[Lane]  # one: a fixed run; two: a paired run, in ABBA order
    opts: RunOptions
    rule: IterationRule
    settled: SettledFn | None = None  # a paired run's judge of auto counts
    progress: ProgressFn | None = None
    stop_reason: StopReason = "count"
    interrupted: bool = False
    started: float = 0.0
    duration_s: float = 0.0

    stolen: StolenTime = field(init=False)

    def __post_init__(self) -> None:
        extra = self.opts.iters if self.opts.exclude_stolen else 0  # 0: none measured again
        self.stolen = StolenTime.of(len(self.lanes), extra)
        if shared_modules(self.lanes):
            for lane in self.lanes:
                lane.patch_each_iteration = True

    @property
    def paired(self) -> bool:
        return len(self.lanes) > 1

    def run(self, warnings: Sequence[str] = ()) -> tuple[ProfileSession, ...]:
        """Warm up and measure every lane; their sessions, which say `warnings` too. The models
        are on the run's device and it has its threads until the sessions are built (they record
        both), and with `opts.flops` until each session's FLOPs are counted."""
        begun = time.perf_counter()
        with torch_threads(self._threads()), _placed(self.lanes):
            with self._kept():
                self._iterate()
            self.duration_s = time.perf_counter() - begun
            sessions = self.sessions(warnings)
            if not self.opts.flops:
                return sessions
            return tuple(
                self._with_work(s, lane) for s, lane in zip(sessions, self.lanes, strict=True)
            )

    def _threads(self) -> int | None:
        """The run's torch threads: the options', else one; but code the caller compiled keeps
        the caller's threads unless told (None): dynamo guards on the count, so another would
        compile it again for the run and again at the caller's next call."""
        opts = self.opts
        caller_compiled = any(lane.compiled is not None for lane in self.lanes)
        if opts.threads is None and caller_compiled and not opts.compiled_by_hybridprof:
            return None
        return opts.run_threads

    def sessions(self, warnings: Sequence[str] = ()) -> tuple[ProfileSession, ...]:
        """Each lane's session of the iterations measured so far."""
        said = (*warnings, *self._warnings())
        return tuple(lane.session(self._facts(lane, said)) for lane in self.lanes)

    # -- the iterations

    def _iterate(self) -> None:
        begun: list[Lane] = []
        try:
            for lane in self.lanes:
                lane.driver.begin()
                begun.append(lane)
            self.started = time.perf_counter()
            with long_lived_frozen():
                self._warm_up()
                self._measure()
                self._bare_steps()
        except KeyboardInterrupt:
            if not len(self.lanes[0].measures):
                raise  # nothing measured yet (not one pair): nothing worth saving
            self.interrupted = True
            self.stop_reason = "interrupted"
        finally:
            for lane in begun:
                lane.driver.end()

    def _warm_up(self) -> None:
        """Unmeasured iterations of each lane in turn, until every lane's warm-up is over."""
        total = self.rule.warmup_total()
        compiled = any(lane.compiled is not None for lane in self.lanes)
        if compiled:  # the first calls compile (seconds to minutes): said as it starts and ends
            self._report("compile", 0, 1)
        self._report("warmup", 0, total)
        while waiting := [lane for lane in self.lanes if not lane.warmed_up(self._warmup_done)]:
            for lane in waiting:
                lane.warm_up_once()
            self._report("warmup", min(len(lane.warmup_us) for lane in self.lanes), total)
        for lane in self.lanes:
            lane.warm_up_done()
        if compiled:
            self._report("compile", 1, 1)

    def _bare_steps(self) -> None:
        """A fixed run's step timed bare BARE_STEPS times after its measured iterations
        (`Driver.time_bare_steps`): the workload's own time, beside the profiled one, warm.
        After, so that a model failing on its Nth call fails in a profiled step, which names it;
        one failing here (or interrupted) leaves no bare time, and the calibrated costs stand.
        A paired run's lanes are judged against each other, not against their bare time."""
        lane = self.lanes[0]
        if self.paired or not lane.times_bare_steps:
            return
        try:
            lane.time_bare_steps(BARE_STEPS)
        except ModelRunError:
            lane.driver.bare_steps_us.clear()

    def _warmup_done(self, times_us: list[float]) -> bool:
        return self.rule.warmup_done(times_us, self._elapsed())

    def _measure(self) -> None:
        """Measured rounds until the rule (count, convergence, time, cap) or `settled` says stop."""
        total = self.rule.iters_total()
        self._report("measure", 0, total)
        check_at = FIRST_CHECK_PAIRS
        while (reason := self._stop_reason()) is None:
            if not self._round():
                continue
            done = len(self.lanes[0].measures)
            self._report("measure", done, total)
            if self.settled is not None and done >= check_at and self.rule.iters == AUTO:
                check_at = max(check_at + 1, round(check_at * CHECK_GROWTH))
                if self.settled(*self.sessions()):
                    reason = "converged"
                    break
        self.stop_reason = reason

    def _round(self) -> bool:
        """One measured iteration of each lane, in ABBA order; kept only once all are done (Ctrl-C
        between the halves of a pair leaves whole pairs), and dropped whole when compiled code
        compiled again in one of them (False)."""
        pair = len(self.lanes[0].measures)
        order = self.lanes if pair % 2 == 0 else self.lanes[::-1]
        done = [(lane, lane.measure_once(self.opts.warm_step)) for lane in order]
        kept = [(lane, measure) for lane, measure in done if measure is not None]
        if len(kept) < len(done):
            _dropped(kept)
            return False
        waits = [lane.driver.step_wait_us for lane in self.lanes]
        if self.stolen.exclude(waits, [lane.driver.step_us for lane in self.lanes]):
            _dropped(kept)
            return False  # another process had the core: measured again (stolen_time.py)
        for lane, measure in kept:
            lane.keep(measure)
        return True

    def _stop_reason(self) -> StopReason | None:
        # One lane converges on its own iteration times; two lanes on `settled`, in `_measure`.
        lead = self.lanes[0]
        return self.rule.stop_reason(lead.iteration_us, self._elapsed(), by_times=not self.paired)

    # -- around the iterations

    @contextlib.contextmanager
    def _kept(self) -> Iterator[None]:
        """Every model in its run state and patched (each lane for the run, or only around its
        own iterations), compiled code's compile hooked, the caller's random streams kept; each
        put back exactly as it was afterwards, and a trace file a failed run began removed."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(random_state_kept(self.lanes[0].device))
            for lane in self.lanes:
                stack.enter_context(model_state_kept(lane.model, training=self.opts.backward))
            for lane in self.lanes:
                if not lane.patch_each_iteration:
                    lane.driver.patch()
                    stack.callback(lane.driver.restore)
                stack.enter_context(_trace_removed_on_failure(lane.driver.config.trace_path))
                if lane.compiled is not None:
                    stack.enter_context(lane.compiled.instrumented())
            yield

    def _facts(self, lane: Lane, warnings: Sequence[str]) -> RunFacts:
        opts = self.opts
        return RunFacts(
            environment=environment(lane.device),
            warmup=len(lane.warmup_us),
            requested_warmup=opts.warmup,
            requested_iterations=opts.iters,
            stop_reason=self.stop_reason,
            max_time_s=self.rule.max_time_s,
            interrupted=self.interrupted,
            warnings=tuple(warnings),
            command=opts.command,
            model_file=lane.model_file,
            model_hash=lane.model_hash,
            duration_s=round(self.duration_s or self._elapsed(), 3),
            trace_file=lane.driver.config.trace_path,
            cpu_waits=self._waits(lane),
        )

    def _waits(self, lane: Lane) -> CpuWaits | None:
        return self.stolen.waits(self.lanes.index(lane), lane.wait_us)

    def _warnings(self) -> list[str]:
        done, unit = len(self.lanes[0].measures), "pairs" if self.paired else "iterations"
        lost = waits_line(self._waits(self.lanes[0]), done, unit)
        return ([lost] if lost else []) + self._stop_warnings(done, unit)

    def _stop_warnings(self, done: int, unit: str) -> list[str]:
        if self.interrupted:
            asked = "" if self.opts.iters == AUTO else f" of {self.opts.iters}"
            return [f"interrupted after {done}{asked} measured {unit}"]
        if self.opts.iters == AUTO and not self.paired:
            short = unconverged(self.stop_reason, self.rule, self.lanes[0].iteration_us)
            return [short] if short else []
        return []

    def _with_work(self, session: ProfileSession, lane: Lane) -> ProfileSession:
        opts = self.opts
        peaks = (opts.peak_gflops, opts.peak_gbps)
        return with_work(session, lane.model, lane.inputs, opts.backward, peaks)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    def _report(self, phase: str, done: int, total: int | None) -> None:
        if self.progress is not None and total != 0:
            self.progress(phase, done, total)


def _dropped(measures: list[tuple[Lane, IterationMeasure]]) -> None:
    """Measured iterations left out: one whose memory was broken down (what was live at the
    peak, the timeline) must not stand for the run, so the next one is broken down again."""
    for lane, measure in measures:
        if measure.memory is not None and measure.memory.broken_down:
            lane.forget_breakdown()


@contextlib.contextmanager
def _placed(lanes: list[Lane]) -> Iterator[None]:
    """Each model on its lane's device for the block, then back where it was."""
    with contextlib.ExitStack() as stack:
        for lane in lanes:
            stack.enter_context(placed_on(lane.model, lane.device))
        yield


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


__all__ = ["CHECK_GROWTH", "FIRST_CHECK_PAIRS", "ORDER", "IterationLoop", "SettledFn"]
