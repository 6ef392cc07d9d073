"""`--compare-eager`: the same model eager and compiled in one process, interleaved.

Each round runs one eager iteration (every selected module of the eager model patched for that
iteration only, then restored) and one compiled iteration (nothing inside compiled code patched).
The compiled model's guards are evaluated only when it is called, and by then the eager patches
are gone, so the eager iterations make it compile nothing. Both sides run the same step in the
same grad mode on the same inputs; each side's rows add up to its own iterations (its own
`(outside modules)`), and the two sessions are compared by the ordinary diff (`diff/speedup.py`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.diff.speedup import SpeedupResult as CompileComparison
from hybridprof.diff.speedup import speedup_of as compare_sessions
from hybridprof.errors import UsageError
from hybridprof.files.loader import ModelInputs, as_model_inputs
from hybridprof.runtime.compiled.run import EXTRA_WARMUP, CompiledRun, compiled_run
from hybridprof.runtime.measures.aggregate import RunFacts, environment
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.model_state import model_state_kept, random_state_kept
from hybridprof.runtime.workload import (
    model_device,
    placed_on,
    resolve_device,
    to_device,
    torch_threads,
    training_step,
)

StepFn = Callable[[nn.Module, ModelInputs], Any]


def compare_eager(
    eager: nn.Module,
    compiled: nn.Module,
    inputs: Any,
    plan: ProfilePlan,
    opts: Any,  # driver.RunOptions
    step: StepFn,
    *,
    threshold_pct: float = 5.0,
) -> CompileComparison:
    """Eager and compiled iterations of one model, interleaved; the two sessions compared."""
    from hybridprof.runtime.driver import Driver

    if opts.iters == "auto" or opts.warmup == "auto":
        raise UsageError(
            "--compare-eager runs eager and compiled iterations in pairs: give --warmup and "
            "--iters as numbers, not auto"
        )
    opts.check()
    by = "hybridprof" if opts.compiled_by_hybridprof else "user"
    run = compiled_run(compiled, opts.strategy or "session", compiled_by=by)
    if run is None:
        raise UsageError("--compare-eager needs a compiled model: add --compile")
    device = resolve_device(opts.device) or model_device(eager)
    model_inputs = as_model_inputs(inputs, "the inputs")
    if device is not None:
        model_inputs = to_device(model_inputs, device)
    config = Driver.config_for(plan, device, backward=opts.backward)
    sides = (
        Driver(eager, plan, "session", config, record_shapes=True),
        Driver(compiled, plan, "session", replace(config, compiled=run), record_shapes=True,
               compiled=run),
    )  # fmt: skip
    run.grad_enabled = opts.backward or _grad_enabled()
    started = time.perf_counter()
    measures: tuple[list[IterationMeasure], list[IterationMeasure]] = ([], [])
    with (
        placed_on(eager, device),
        torch_threads(opts.threads),
        random_state_kept(device),
        model_state_kept(eager, training=opts.backward),
        run.instrumented(),
    ):
        for driver in sides:
            driver.begin()
        try:
            _warm_up(sides, run, opts.warmup, lambda m: step(m, model_inputs))
            _measure(sides, run, opts.iters, lambda m: step(m, model_inputs), measures)
        finally:
            for driver in sides:
                driver.end()
    seconds = round(time.perf_counter() - started, 3)
    sessions = [
        _session(driver, measures[i], opts, device, seconds) for i, driver in enumerate(sides)
    ]
    return compare_sessions(sessions[0], run.finish(sessions[1]), threshold_pct)


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


def _iteration(
    driver: Any, model: nn.Module, run_step: Callable[[nn.Module], Any], **kw: Any
) -> Any:
    driver.patch()
    try:
        return driver.iteration(lambda: run_step(model), **kw)
    finally:
        driver.restore()


def _warm_up(
    sides: tuple[Any, Any], run: CompiledRun, count: int, step: Callable[[nn.Module], Any]
) -> None:
    eager, compiled = sides
    for _ in range(count):
        _iteration(eager, eager.model, step, warmup=True)
    rounds = 0
    while rounds < max(count, 1) or (run.compiled_last and rounds < count + EXTRA_WARMUP):
        before = run.snapshot()
        with run.step_context():
            _iteration(compiled, compiled.model, step, warmup=True)
        run.warm_iteration_done(before)
        rounds += 1
    run.warmup_done(compiled.plan.selected_paths())


def _measure(
    sides: tuple[Any, Any],
    run: CompiledRun,
    iters: int,
    step: Callable[[nn.Module], Any],
    measures: tuple[list[IterationMeasure], list[IterationMeasure]],
) -> None:
    eager, compiled = sides
    while len(measures[1]) < iters:
        measured = _iteration(eager, eager.model, step, warm=True)
        run.begin_iteration()
        with run.step_context() if run.islands is not None else contextlib.nullcontext():
            compiled_measure = _iteration(compiled, compiled.model, step, warm=True)
        if run.recompiled() is not None:
            continue  # both sides of the pair are left out
        measures[0].append(measured)
        measures[1].append(compiled_measure)


def _session(
    driver: Any, measures: list[IterationMeasure], opts: Any, device: Any, seconds: float
) -> ProfileSession:
    facts = RunFacts(
        environment=environment(device),
        warmup=opts.warmup,
        requested_warmup=opts.warmup,
        requested_iterations=opts.iters,
        command=opts.command,
        model_file=opts.model_file,
        model_hash=opts.model_hash,
        duration_s=seconds,
    )
    return driver.build_session(measures, facts)  # type: ignore[no-any-return]


__all__ = ["compare_eager", "training_step"]
