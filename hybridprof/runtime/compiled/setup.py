"""What `compile=True` / `--compile` and `compare_eager` / `--compare-eager` set up.

hybridprof compiles with `torch.compile(model, mode=...)`: the wrapper shares the user's modules
and leaves the model itself eager (its next eager call compiles nothing). The compile happens in
warm-up, with inductor's codegen hooked. A model with compiled code runs its forward in the
caller's grad mode (dynamo guards on it: a profile under `no_grad` would leave a model that
recompiles on its next call with gradients on); the command line runs forwards under `no_grad`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan
from hybridprof.diff.speedup import SpeedupResult as CompileComparison
from hybridprof.errors import UsageError
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.compiled.detect import find_compiled
from hybridprof.runtime.workload import forward_once, training_step

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True, slots=True)
class CompiledSetup:
    model: nn.Module  # what runs: the user's compiled model, or hybridprof's torch.compile of it
    eager: nn.Module  # the eager module (for compare_eager)
    by_hybridprof: bool
    grad_as_called: bool  # keep the caller's grad mode (the library) or no_grad (the CLI)

    def step(self, opts: Any) -> Callable[[nn.Module, ModelInputs], Any] | None:
        if opts.backward:
            return None  # the driver's training step
        return forward_as_called if self.grad_as_called else forward_once

    def compare(self, inputs: Any, plan: ProfilePlan, opts: Any) -> CompileComparison:
        from hybridprof.runtime.compiled.compare import compare_eager

        step = training_step if opts.backward else self.step(opts)
        assert step is not None
        return compare_eager(self.eager, self.model, inputs, plan, opts, step)


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
