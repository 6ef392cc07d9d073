"""Profile a model end to end: warm-up, measured iterations, optional backward, a ProfileSession.

`profile()` is what `hybridprof run` and the library's `hybridprof.profile` call. It plans (or takes a
plan), patches the selected modules, runs `warmup` unmeasured iterations (the first profiled steps of
torch are far slower than the rest, and the profiler's start-up is paid there) and `iters` measured
ones, and always restores the model. Ctrl-C during the measured iterations keeps what was measured
and marks the session `interrupted`; a model that raises becomes a `ModelRunError` naming the layer.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.errors import HybridprofError, ModelRunError, UsageError
from hybridprof.loader import ModelInputs, as_model_inputs, keeping_cwd
from hybridprof.planner.compat import Compat, probe
from hybridprof.planner.module_tree import Selector, module_at, named_modules, tree_plan
from hybridprof.planner.plan import check_plan_compat
from hybridprof.runtime.aggregate import build_session, environment
from hybridprof.runtime.measure import IterationMeasure
from hybridprof.runtime.patching import ForwardPatcher
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, make_strategy
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig
from hybridprof.runtime.workload import (
    ShapeRecorder,
    TrainingState,
    forward_once,
    model_device,
    placed_on,
    resolve_device,
    to_device,
    torch_threads,
    training_step,
)

# phase ("warmup" or "measure"), iterations done in that phase, iterations in that phase
ProgressFn = Callable[[str, int, int], None]

# Strategies that attribute backward ops to the layer whose forward made them.
BACKWARD_STRATEGIES = ("session",)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run: iterations, what to measure, and what to record about the run."""

    warmup: int = 3
    iters: int = 20
    strategy: str | None = None  # None: the plan's strategy, else DEFAULT_STRATEGY
    device: str | None = None  # None: wherever the model is
    profile_memory: bool = False
    backward: bool = False
    trace_path: str | None = None
    threads: int | None = None  # torch intra-op threads for the run; None: leave torch's setting
    command: tuple[str, ...] = ()
    model_file: str | None = None
    model_hash: str | None = None


def run_profile(
    model: nn.Module,
    inputs: Any,
    opts: RunOptions,
    *,
    plan: ProfilePlan | None = None,
    paths: Sequence[Selector] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    progress: ProgressFn | None = None,
) -> ProfileSession:
    """`hybridprof.profile()`'s work (see `hybridprof.api.run`): check, place, run, restore."""
    _check_counts(opts)
    device = resolve_device(opts.device) or model_device(model)
    model_inputs = as_model_inputs(inputs, "the inputs")
    if device is not None:
        model_inputs = to_device(model_inputs, device)
    warnings: list[str] = []
    compat = probe()
    if plan is None:
        plan = tree_plan(model, paths, globs, depth, strategy=opts.strategy or DEFAULT_STRATEGY)
    else:
        plan = checked_plan(plan, model, compat, warnings)
    strategy_name = opts.strategy or plan.strategy or DEFAULT_STRATEGY
    if opts.backward and strategy_name not in BACKWARD_STRATEGIES:
        raise UsageError(
            "--backward needs a strategy that attributes backward ops "
            f"({', '.join(BACKWARD_STRATEGIES)}); '{strategy_name}' does not: "
            f"drop --strategy {strategy_name} or drop --backward"
        )
    run = _Run(model, model_inputs, plan, compat, strategy_name, opts, device, progress)
    with placed_on(model, device), torch_threads(opts.threads):
        return run.execute(warnings)


def checked_plan(
    plan: ProfilePlan, model: nn.Module, compat: Compat, warnings: list[str]
) -> ProfilePlan:
    """The plan, after checking its selected paths exist in `model`; re-probed on another torch."""
    _check_plan_paths(plan, model)
    warnings.extend(check_plan_compat(plan))
    fresh = compat.choices()
    if plan.torch_version != compat.torch_version or plan.compat != fresh:
        plan = replace(plan, compat=fresh, torch_version=compat.torch_version)
    return plan


def _check_plan_paths(plan: ProfilePlan, model: nn.Module) -> None:
    selected = plan.selected_paths()
    if not selected:
        raise UsageError(
            "the plan selects no module; select some with `hybridprof analyze --paths`"
        )
    known = {path for path, _ in named_modules(model)}
    missing = [path for path in selected if path not in known]
    if not missing:
        return
    many = len(missing) > 1
    shown = ", ".join(repr(p) for p in missing[:5]) + (", ..." if len(missing) > 5 else "")
    made_for = f", the plan was made for {plan.root_class}" if plan.root_class else ""
    raise UsageError(
        f"the plan's {'paths' if many else 'path'} {shown} {'are' if many else 'is'} not in "
        f"this model ({type(model).__name__}{made_for}); "
        "make a plan for this model with `hybridprof analyze`"
    )


def _check_counts(opts: RunOptions) -> None:
    if opts.warmup < 0:
        raise UsageError(f"warm-up iterations must be 0 or more, got {opts.warmup}")
    if opts.iters < 1:
        raise UsageError(f"iterations must be 1 or more, got {opts.iters}")
    if opts.threads is not None and opts.threads < 1:
        raise UsageError(f"--threads must be 1 or more, got {opts.threads}")


@dataclass
class _Run:
    """One `profile()` call's state: kept together so the steps stay small functions."""

    model: nn.Module
    inputs: ModelInputs
    plan: ProfilePlan
    compat: Compat
    strategy_name: str
    opts: RunOptions
    device: torch.device | None
    progress: ProgressFn | None
    measures: list[IterationMeasure] = field(default_factory=list)
    interrupted: bool = False

    def execute(self, warnings: list[str]) -> ProfileSession:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.perf_counter()
        strategy = make_strategy(self.strategy_name, self._config())
        recorder = ShapeRecorder(strategy)
        patcher = ForwardPatcher(self.model, self.plan.selected_paths(), recorder.call)
        training = TrainingState(self.model) if self.opts.backward else None
        with _restoring(patcher, training), _trace_removed_on_failure(self.opts.trace_path):
            self._iterate(strategy, recorder, patcher)
        if self.interrupted:
            warnings.append(
                f"interrupted after {len(self.measures)} of {self.opts.iters} measured iterations"
            )
        session = build_session(
            self.plan,
            self.measures,
            self.strategy_name,
            **self._session_fields(started_at, time.perf_counter() - start, warnings),
        )
        nothing = never_ran_warning(session)
        return replace(
            session,
            records=tuple(recorder.apply(r) for r in session.records),
            warnings=session.warnings + ((nothing,) if nothing else ()),
        )

    def _config(self) -> StrategyConfig:
        return StrategyConfig(
            paths=self.plan.selected_paths(),
            compat=self.compat,
            profile_memory=self.opts.profile_memory,
            use_device=self.device is not None and self.device.type == "cuda",
            backward=self.opts.backward,
            trace_path=self.opts.trace_path,
            warmup_iterations=self.opts.warmup,
        )

    def _iterate(
        self, strategy: Strategy, recorder: ShapeRecorder, patcher: ForwardPatcher
    ) -> None:
        strategy.begin()
        try:
            self._report("warmup", 0, self.opts.warmup)
            for done in range(1, self.opts.warmup + 1):
                self._one(strategy, patcher)
                recorder.recording = False
                self._report("warmup", done, self.opts.warmup)
            self._report("measure", 0, self.opts.iters)
            for done in range(1, self.opts.iters + 1):
                self.measures.append(self._one(strategy, patcher))
                recorder.recording = False
                self._report("measure", done, self.opts.iters)
        except KeyboardInterrupt:
            if not self.measures:
                raise  # nothing measured yet: there is nothing worth saving
            self.interrupted = True
        finally:
            strategy.end()

    def _one(self, strategy: Strategy, patcher: ForwardPatcher) -> IterationMeasure:
        step = training_step if self.opts.backward else forward_once
        strategy.begin_iteration()
        try:
            with keeping_cwd():
                step(self.model, self.inputs)
        except HybridprofError:
            _abandon_iteration(strategy)
            raise
        except Exception as exc:
            _abandon_iteration(strategy)
            raise ModelRunError(self._failure_message(patcher, exc)) from exc
        except BaseException:  # KeyboardInterrupt: close the iteration, the caller decides
            _abandon_iteration(strategy)
            raise
        return strategy.end_iteration()

    def _failure_message(self, patcher: ForwardPatcher, exc: Exception) -> str:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        text = lines[0].strip() if lines else ""
        if not isinstance(exc, RuntimeError) or not text:
            text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        path = patcher.failed_path
        if path is None:
            where = "the training step" if self.opts.backward else "the forward"
            return (
                f"{where} of {type(self.model).__name__} failed outside the profiled layers: {text}"
            )
        target = self.plan.target(path)
        cls = target.class_name if target else type(module_at(self.model, path)).__name__
        return (
            f"forward failed in {path or '(root)'} ({cls}): {text}; check that the inputs fit "
            "the model"
        )

    def _report(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None and total > 0:
            self.progress(phase, done, total)

    def _session_fields(
        self, started_at: str, seconds: float, warnings: list[str]
    ) -> dict[str, Any]:
        return {
            "environment": environment(self.device),
            "warmup": self.opts.warmup,
            "iterations": len(self.measures),
            "requested_iterations": self.opts.iters,
            "interrupted": self.interrupted,
            "profile_memory": self.opts.profile_memory,
            "use_device": self.device is not None and self.device.type == "cuda",
            "backward": self.opts.backward,
            "warnings": tuple(warnings),
            "command": self.opts.command,
            "model_file": self.opts.model_file,
            "model_hash": self.opts.model_hash,
            "started_at": started_at,
            "duration_s": round(seconds, 3),
            "trace_file": self.opts.trace_path,
        }


def never_ran_warning(session: ProfileSession) -> str | None:
    """Why selected layers got 0 calls when their parents did the work, and what to select.

    nn.TransformerEncoder in eval mode runs one fused op per layer and never calls the layer's
    Linear/LayerNorm children; nn.MultiheadAttention uses its out_proj's weights without calling
    it. Leaves-only selections then miss that time: the nearest parents are what did the work.
    """
    if not session.never_called:
        return None
    if not session.records:
        parents = _outermost({path.rpartition(".")[0] for path in session.never_called})
        instead = "--depth 0" if parents == [""] else "--paths " + " ".join(parents[:4])
        more = " ..." if len(parents) > 4 else ""
        count = len(session.never_called)
        return (
            f"none of the {count} selected layer{'s' if count > 1 else ''} ran (the model skipped "
            "them, e.g. a fused fast path such as nn.TransformerEncoder's in eval mode); profile "
            f"the modules that run them instead: {instead}{more} (or --with-parents)"
        )
    return _skipped_by_parents(session)


def _skipped_by_parents(session: ProfileSession) -> str | None:
    """Some layers never ran because an unselected parent with inline ops does their work."""
    doers = {f.path for f in session.plan.findings if f.kind == "inline_ops"}
    selected = set(session.plan.selected_paths())
    skipped = [
        p
        for p in session.never_called
        if (parent := p.rpartition(".")[0]) in doers and parent not in selected and parent
    ]
    if not skipped:
        return None
    more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
    return (
        f"{skipped[0]}{more} never ran: "
        + (
            "the modules around them do the work themselves"
            if more
            else "the module around it does the work itself"
        )
        + " (e.g. nn.MultiheadAttention uses out_proj's weights), so no row shows that time; "
        "add such parents with --with-parents"
    )


def _outermost(paths: set[str]) -> list[str]:
    """Paths that are not inside another of them ("" is the root, inside nothing)."""
    if "" in paths:
        return [""]
    return sorted(p for p in paths if not any(p.startswith(q + ".") for q in paths if q != p))


def _abandon_iteration(strategy: Strategy) -> None:
    """Close an iteration that failed half-way so `end()` finds a consistent strategy; drop its data."""
    with contextlib.suppress(Exception):
        strategy.end_iteration()


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
def _restoring(patcher: ForwardPatcher, training: TrainingState | None) -> Iterator[None]:
    """Training state outermost, patches inside: undone in reverse, whatever happens."""
    if training is not None:
        training.enter()
    try:
        with patcher:
            yield
    finally:
        if training is not None:
            training.restore()


__all__ = [
    "BACKWARD_STRATEGIES",
    "RunOptions",
    "checked_plan",
    "model_device",
    "never_ran_warning",
    "resolve_device",
    "run_profile",
]
