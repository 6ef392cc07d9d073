"""How a driven run runs (`RunOptions`), and the callbacks every way of driving one takes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import UsageError
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.limits import DEFAULT_THREADS, threads_problem
from hybridprof.runtime.basics.stopping import Count, IterationRule
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, check_backward

# phase ("warmup" or "measure"), iterations done in that phase, iterations in that phase (None:
# decided as the run goes, "auto")
# (phase, done, total): "warmup" and "measure" count iterations; "compile" is (0, 1) when a
# warm-up with compiled code starts and (1, 1) when it is over.
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
    threads: int | None = None  # torch intra-op threads for the run; None: DEFAULT_THREADS (1)
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
    # Iterations that lost their core to other processes are measured again (stolen_time.py);
    # off for a torchrun rank, whose steps must match the other ranks' one for one.
    exclude_stolen: bool = True

    def check(self) -> IterationRule:
        """Refuse bad values; the rule that decides how many iterations run."""
        if self.threads is not None and (problem := threads_problem(self.threads, "--threads")):
            raise UsageError(problem)
        for name, value in (("peak_gflops", self.peak_gflops), ("peak_gbps", self.peak_gbps)):
            if value is not None and not 0 < value < float("inf"):
                raise UsageError(f"{name} must be a positive number, got {value}")
        return IterationRule.of(self.warmup, self.iters, self.max_time_s)

    def strategy_for(self, plan: ProfilePlan) -> str:
        """The run's strategy: the options', else the plan's, else the default; a backward run's
        is one that attributes backward ops (UsageError otherwise)."""
        strategy = self.strategy or plan.strategy or DEFAULT_STRATEGY
        if self.backward:
            check_backward(strategy)
        return strategy

    @property
    def run_threads(self) -> int:
        """The torch threads the run sets: the options', else the default (one)."""
        return DEFAULT_THREADS if self.threads is None else self.threads

    @property
    def compiled_by(self) -> str:
        """Who compiled the model's compiled parts, as the session's compile section says."""
        return "hybridprof" if self.compiled_by_hybridprof else "user"


__all__ = ["ProgressFn", "RunOptions", "StepFn"]
