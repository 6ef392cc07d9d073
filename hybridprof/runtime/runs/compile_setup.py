"""What `compile=True` / `--compile` and `compare_eager` / `--compare-eager` set up: the compiled
model a run measures, and the speedup run beside the eager model (`speedup_run.py`).

hybridprof compiles with `torch.compile(model, mode=...)`: the wrapper shares the user's modules
and leaves the model itself eager (its next eager call compiles nothing). The compile happens in
warm-up, with inductor's codegen hooked. A model with compiled code runs its forward in the
caller's grad mode (dynamo guards on it: a profile under `no_grad` would leave a model that
recompiles on its next call with gradients on); the command line runs forwards under `no_grad`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan
from hybridprof.diff.speedup import SpeedupResult
from hybridprof.errors import UsageError
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.workload import forward_once
from hybridprof.runtime.compiled.detect import find_compiled
from hybridprof.runtime.runs.options import ProgressFn, RunOptions, StepFn
from hybridprof.runtime.runs.speedup_run import measure_speedup

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True, slots=True)
class CompiledSetup:
    model: nn.Module  # what runs: the user's compiled model, or hybridprof's torch.compile of it
    eager: nn.Module  # the eager module (the base lane of the speedup run)
    by_hybridprof: bool
    grad_as_called: bool  # keep the caller's grad mode (the library) or no_grad (the CLI)

    def step(self, opts: RunOptions) -> StepFn | None:
        if opts.backward:
            return None  # the lane's training step
        return forward_as_called if self.grad_as_called else forward_once

    def measure_speedup(
        self,
        inputs: Any,
        plan: ProfilePlan,
        opts: RunOptions,
        progress: ProgressFn | None = None,
    ) -> SpeedupResult:
        """The eager model against the compiled one, as a paired run."""
        step = self.step(opts)
        return measure_speedup(self.eager, self.model, inputs, plan, opts, step, progress=progress)


def forward_as_called(model: nn.Module, inputs: ModelInputs) -> Any:
    """A forward in the caller's grad mode (what the compiled model was or will be called in)."""
    return model(*inputs.args, **inputs.kwargs)


def compiled_for_run(
    model: nn.Module,
    compile: bool,
    mode: str | None,
    compare_eager: bool,
    *,
    grad_as_called: bool = True,
) -> CompiledSetup | None:
    """The compiled model to run (None: nothing compiled, nothing to compile)."""
    layout = find_compiled(model)
    if compile:
        if layout is not None:
            where = layout.parts[0].path or "the model"
            raise UsageError(
                f"{where} is torch.compile'd already: drop compile=True / --compile "
                "(hybridprof profiles compiled models as they are)"
            )
        if mode is not None and mode not in COMPILE_MODES:
            raise UsageError(
                f"unknown compile mode '{mode}'; use one of: {', '.join(COMPILE_MODES)}"
            )
        import torch

        compiled: nn.Module = torch.compile(  # type: ignore[assignment]
            model, mode=None if mode == "default" else mode
        )
        return CompiledSetup(compiled, model, True, grad_as_called)
    if mode is not None:
        raise UsageError("a compile mode needs compile=True / --compile")
    if layout is None:
        if compare_eager:
            raise UsageError(
                "compare_eager / --compare-eager compares the eager model with its compiled "
                "version: add compile=True / --compile"
            )
        return None
    if compare_eager:
        eager = getattr(model, "_orig_mod", None)
        if eager is None or len(layout.parts) != 1 or layout.parts[0].path:
            raise UsageError(
                "--compare-eager needs the eager model: give it uncompiled with --compile "
                "(compile=True), or torch.compile(model) as a whole"
            )
        return CompiledSetup(model, eager, False, grad_as_called)
    return CompiledSetup(model, model, False, grad_as_called)


__all__ = ["COMPILE_MODES", "CompiledSetup", "compiled_for_run", "forward_as_called"]
