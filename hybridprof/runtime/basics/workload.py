"""One unit of work the driver repeats: a forward, or a training step (forward, loss, backward).

Forwards without `backward` run under `torch.no_grad()`, not `torch.inference_mode()`: tensors a
model caches on itself during an inference-mode forward become inference tensors, and training the
model later raises "Inference tensors cannot be saved for backward" (checked on torch 2.13), and
`profile()` hands the model back to a user who may do just that. The no_grad cost over
inference_mode (version-counter bumps) is small next to the profiler's.

What a run changes in the model (buffers, and for a training step modes, `requires_grad` and
`.grad`s; the step's gradients are dropped after each step, so nothing accumulates) is saved and put
back by `model_state.ModelState`.

`ShapeRecorder` sits between the patched forwards and the strategy to note each path's first input
and output shapes for the session.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from hybridprof.datamodel import ModuleRecord
from hybridprof.errors import DeviceError, ModelRunError, UsageError
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.patching import CallFn
from hybridprof.runtime.basics.tensors import iter_tensors


def to_device(value: Any, device: torch.device) -> Any:
    """Tensors anywhere in tuples, lists and dicts moved to `device`; everything else as is."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, ModelInputs):
        return ModelInputs(to_device(value.args, device), to_device(value.kwargs, device))
    if isinstance(value, tuple | list):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


@contextlib.contextmanager
def placed_on(model: nn.Module, device: torch.device | None) -> Iterator[None]:
    """`model` on `device` while the block runs, then back on the device it was on."""
    where = {t.device for t in itertools.chain(model.parameters(), model.buffers())}
    if device is None or not where or where == {device}:
        yield
        return
    if len(where) > 1:
        shown = ", ".join(sorted(str(d) for d in where))
        raise UsageError(
            f"the model is spread over several devices ({shown}); profile it where it is, "
            "without a device"
        )
    original = where.pop()
    model.to(device)
    try:
        yield
    finally:
        model.to(original)


def scalar_loss(output: Any) -> torch.Tensor:
    """A scalar to call backward on: the sum of the means of every floating output with a gradient.

    Every output, not the first: BERT returns (last_hidden_state, pooler_output) and a loss on the
    first alone leaves the pooler without a backward. The mean (in float32, so half-precision sums
    cannot overflow) keeps the loss's size independent of the batch; the profile only needs
    backward to run through every layer, not a real loss.
    """
    floating = [t for t in iter_tensors(output) if t.is_floating_point()]
    with_grad = [t for t in floating if t.requires_grad]
    if with_grad:
        first = with_grad[0].float().mean()
        return sum((t.float().mean().to(first.device) for t in with_grad[1:]), first)
    if floating:
        raise ModelRunError(
            "--backward: the model's output does not depend on any trainable tensor, so there is "
            "no backward to profile; profile without --backward"
        )
    raise ModelRunError(
        f"--backward: no floating-point tensor in the model's output ({type(output).__name__}) "
        "to make a loss from; profile without --backward"
    )


def forward_once(model: nn.Module, inputs: ModelInputs) -> Any:
    with torch.no_grad():
        return model(*inputs.args, **inputs.kwargs)


class BackwardFailed(Exception):
    """The backward pass raised (`__cause__` is what it raised): not the forward, not the output."""


def training_step(model: nn.Module, inputs: ModelInputs) -> Any:
    """Forward, loss, backward; gradients dropped after so memory does not grow over iterations."""
    output = model(*inputs.args, **inputs.kwargs)
    loss = scalar_loss(output)
    try:
        loss.backward()
    except Exception as exc:
        raise BackwardFailed(str(exc)) from exc
    finally:
        for parameter in model.parameters():
            parameter.grad = None
    return output


@dataclass
class ShapeRecorder:
    """Sits between the patched forwards and the strategy; notes shapes of each path's first call.

    Recording is outside the strategy's range and only in the first iteration (normally a warm-up
    one), so it costs the measured iterations nothing.
    """

    strategy_call: CallFn  # what the patched forwards call when no shape is being noted
    recording: bool = True
    passthrough: bool = False  # the runner's unmeasured warm step: forwards run as they are
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def call(self, path: str, forward: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        if self.passthrough:
            return forward(*args, **kwargs)
        if not self.recording or path in self.inputs:
            return self.strategy_call(path, forward, args, kwargs)
        self.inputs[path] = noted(
            lambda: (*map(describe, args), *(f"{k}={describe(v)}" for k, v in kwargs.items()))
        )
        result = self.strategy_call(path, forward, args, kwargs)
        self.outputs[path] = noted(
            lambda: tuple(map(describe, result if isinstance(result, tuple) else (result,)))
        )
        return result

    def apply(self, record: ModuleRecord) -> ModuleRecord:
        if record.path not in self.inputs:
            return record
        return replace(
            record,
            input_shapes=self.inputs[record.path],
            output_shapes=self.outputs.get(record.path, ()),
        )


def noted(shapes: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    """Shapes described, or ("?",) when describing fails: noting shapes is bookkeeping, and must
    never fail a forward that runs (a tensor subclass whose sizes cannot be read, say)."""
    try:
        return shapes()
    except Exception:
        return ("?",)


def describe(value: Any) -> str:
    """A tensor as '1x3x224x224' (a scalar tensor as 'scalar'; a nested tensor, whose parts differ
    in size, as 'nested(2 x 3-d)'), containers in brackets, else the type."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:  # its `.shape` raises: torch's fast paths make these between layers
            return f"nested({value.size(0)} x {value.dim() - 1}-d)"
        return "x".join(str(d) for d in value.shape) or "scalar"
    if isinstance(value, tuple | list):
        inner = ", ".join(describe(v) for v in value[:8])
        more = ", ..." if len(value) > 8 else ""
        return f"({inner}{more})" if isinstance(value, tuple) else f"[{inner}{more}]"
    if value is None:
        return "None"
    return type(value).__name__


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with `threads` intra-op threads, then put torch's setting back.

    One thread gives the steadiest per-layer times: with several, small layers pay for waking the
    OpenMP pool, and on a busy machine that wait swamps them (figures: benchmarks/README.md,
    "Measured in passing").
    """
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_device(
    name: str | None, *, asked_as: str | None = None, fix: str = "--device cpu"
) -> torch.device | None:
    """The requested device, after checking it exists here (DeviceError if not). The one device
    check of every run; `asked_as` and `fix` word the error as the caller's option was spelled."""
    if name is None:
        return None
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UsageError(f"unknown device '{name}'; use cpu or cuda") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        asked = asked_as or f"device '{name}' requested"
        raise DeviceError(
            f"{asked} but CUDA is not available here (torch {torch.__version__}); use {fix}"
        )
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"device '{name}' is not supported; use cpu or cuda")
    if device.type == "cuda" and device.index is None:  # as parameters report it: cuda:0
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def model_device(model: nn.Module) -> torch.device | None:
    """The one device holding the model's parameters and buffers (None: none, or several)."""
    where = {t.device for t in itertools.chain(model.parameters(), model.buffers())}
    return where.pop() if len(where) == 1 else None
