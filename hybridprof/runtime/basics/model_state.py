"""What a profile run changes in a model and in torch, saved first and put back exactly after.

Every run: buffers (BatchNorm's running statistics and `num_batches_tracked` move in train mode,
forward-only too) and the random number streams (Dropout draws from them; a profile must not shift
what the caller's code draws next). A training step (`backward=True`) also: training mode of every
module, `requires_grad` of every parameter (all floating ones on, so every layer has a backward) and
existing `.grad`s (dropped for the run, so nothing accumulates).

`enter()` refuses, before changing anything, what a training step cannot run without damage:
parameters made under `torch.inference_mode()` (they can never require grad) and
post-accumulate-grad hooks (the optimizer-in-backward pattern steps an optimizer from them, which
would change the weights and the optimizer's state). If anything still fails half-way through,
`restore()` undoes exactly what was done so far.
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from hybridprof.errors import UsageError


@dataclass(slots=True)
class ModelState:
    """The state a run may change: `enter()` saves it (and sets it for training), `restore()`."""

    model: nn.Module
    training: bool = False  # a training step: train mode, gradients on
    modes: list[tuple[nn.Module, bool]] = field(default_factory=list)
    flags: list[tuple[nn.Parameter, bool, torch.Tensor | None]] = field(default_factory=list)
    buffers: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def enter(self) -> None:
        if self.training:
            refuse_untrainable(self.model)
        self.buffers = [(b, b.detach().clone()) for b in self.model.buffers()]
        if not self.training:
            return
        self.modes = [(m, m.training) for m in self.model.modules()]
        self.flags = [(p, p.requires_grad, p.grad) for p in self.model.parameters()]
        enter_train_mode(self.model)
        for parameter, requires_grad, _ in self.flags:
            parameter.grad = None
            if not requires_grad and (parameter.is_floating_point() or parameter.is_complex()):
                parameter.requires_grad_(True)

    def restore(self) -> None:
        """Put back what `enter()` saved; each part on its own, so one failure stops no other."""
        for module, training in self.modes:
            if module.training != training:  # a module whose flag cannot change kept it
                with contextlib.suppress(Exception):
                    module.training = training
        for parameter, requires_grad, grad in self.flags:
            if parameter.requires_grad != requires_grad:
                parameter.requires_grad_(requires_grad)
            parameter.grad = grad
        with torch.no_grad():
            for buffer, saved in self.buffers:
                if not _same(buffer, saved):
                    buffer.copy_(saved)
        self.modes, self.flags, self.buffers = [], [], []


def enter_train_mode(model: nn.Module) -> None:
    """`model.train()`, or a UsageError saying why a training step cannot run: when the model
    refuses train mode (a frozen dataclass module cannot set its `training` flag), plain torch
    fails the same way, so it is the model's limit, not a failure of the run."""
    try:
        model.train()
    except Exception as exc:
        why = (
            " (a frozen dataclass module cannot change its training flag)"
            if isinstance(exc, dataclasses.FrozenInstanceError)
            else ""
        )
        raise UsageError(
            f"--backward needs train mode, but model.train() fails{_stuck_at(model, exc)}: "
            f"{type(exc).__name__}: {exc}; plain torch's model.train() fails the same way{why}: "
            "profile without --backward"
        ) from exc


def _stuck_at(model: nn.Module, exc: BaseException) -> str:
    """Where a failed `train()` stopped, as " on 'path' (Class)": the module of the innermost
    `train` call in the traceback (torch's `train` recurses into the children); "" when that
    cannot be told."""
    failed = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_name == "train" and isinstance(frame.f_locals.get("self"), nn.Module):
            failed = frame.f_locals["self"]
    try:
        path = next((p for p, m in model.named_modules() if m is failed), None)
    except Exception:  # a tree torch's own walk cannot take: the message goes without the place
        path = None
    return "" if path is None else f" on '{path or '(root)'}' ({type(failed).__name__})"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


def refuse_untrainable(model: nn.Module) -> None:
    """UsageError (one line) for what a training step cannot run on without damage."""
    named = list(model.named_parameters(remove_duplicate=True))
    frozen = [name for name, p in named if p.is_inference()]
    if frozen:
        raise UsageError(
            f"--backward: parameter '{frozen[0]}'{_more(frozen)} was made under "
            "torch.inference_mode(), so it can never get gradients; build the model outside "
            "inference_mode (torch.no_grad() is fine) or profile without --backward"
        )
    hooked = [(name, hook) for name, p in named for hook in _post_accumulate_hooks(p)]
    if hooked:
        name, hook = hooked[0]
        raise UsageError(
            f"--backward: parameter '{name}'{_more(hooked)} has a "
            f"register_post_accumulate_grad_hook hook ({_hook_name(hook)}), e.g. an optimizer "
            "step in backward, that would change the weights while profiling; profile a copy "
            "without those hooks, or profile without --backward"
        )


def _post_accumulate_hooks(parameter: torch.Tensor) -> list[object]:
    hooks = getattr(parameter, "_post_accumulate_grad_hooks", None)
    return list(hooks.values()) if hooks else []


def _hook_name(hook: object) -> str:
    return str(getattr(hook, "__qualname__", None) or type(hook).__name__)


def _more(items: list[object] | list[str] | list[tuple[str, object]]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


@contextlib.contextmanager
def random_state_kept(device: torch.device | None) -> Iterator[None]:
    """The caller's random streams (CPU, and the run's CUDA device) are as before when this ends."""
    cuda = [device.index or 0] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        yield


@contextlib.contextmanager
def model_state_kept(model: nn.Module, training: bool) -> Iterator[ModelState]:
    """`ModelState.enter()`, the block, then `restore()` whatever happens (a failed enter too)."""
    state = ModelState(model, training)
    try:
        state.enter()
        yield state
    finally:
        state.restore()
