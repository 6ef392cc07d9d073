"""What a profiled window of training steps installs besides the layers' forwards: ranges that
name the optimizer's parts (`runtime/events/training_names.py`), and nothing outside windows.

- torch's global optimizer step pre-hook (`torch.optim.optimizer.register_optimizer_step_pre_hook`;
  it runs inside torch's own `Optimizer.step#<Class>.step` range): it counts the steps, marks each
  param group where the optimizer starts it (a zero-length range from the optimizer class's
  `_init_group`, which every torch optimizer but LBFGS and SparseAdam calls once per group), and
  wraps a `closure` argument in a range (Lightning runs the forward and backward in it: not the
  optimizer's time);
- gradient clipping: the module globals `torch.nn.utils.clip_grad._get_total_norm` and
  `_clip_grads_with_norm_`, which `clip_grad_norm_` looks up on every call, so a `clip_grad_norm_`
  imported before the window is caught too (Lightning's `gradient_clip_val` calls it), with their
  public aliases `torch.nn.utils.get_total_norm` and `clip_grads_with_norm_` (accelerate 1.x's
  `clip_grad_norm_`, which HF's Trainer calls, imports those at each call); `clip_grad_value_`
  through its public names. Where a torch lacks
  the private names, the public `clip_grad_norm_` names are wrapped instead;
- GradScaler's `unscale_`, `step` and `update` (the class `torch.cuda.amp.GradScaler` derives
  from), and `nn.Module.zero_grad` (HF's Trainer zeroes the model, not the optimizer).

Every wrapper tests first that a window is open and that the caller is the thread that opened it;
otherwise it only calls through. Each is put back when the window closes, unless something else
has replaced it since (then it stays, inert: that code's wrapper holds it). Class-level wrappers,
not instance attributes: an instance attribute would go with `copy.deepcopy(optimizer)` and call
the original optimizer from the copy.
"""

from __future__ import annotations

import functools
import threading
from _thread import get_ident
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from hybridprof.runtime.events.training_names import (
    CLIP_RANGE,
    CLOSURE_RANGE,
    GROUP_PREFIX,
    SCALER_RANGE,
    ZERO_GRAD_RANGE,
)

RangeFactory = Callable[[str], AbstractContextManager[Any]]

# Every TrainingHooks installed right now in this process (the test suite asserts it is empty).
_LIVE: dict[int, str] = {}
_LIVE_LOCK = threading.Lock()


def live_hooks() -> tuple[str, ...]:
    """What is installed right now in this process, one description per set of hooks."""
    with _LIVE_LOCK:
        return tuple(_LIVE.values())


class TrainingHooks:
    """The optimizer, clipping, GradScaler and zero_grad ranges of one profiled window."""

    def __init__(self, make_range: RangeFactory) -> None:
        self.make_range = make_range
        self.active = False
        self.owner = 0
        self.optimizer_steps = 0  # steps seen by the pre-hook while installed (all windows)
        self._undo: list[Callable[[], None]] = []
        self._seen: set[type] = set()  # optimizer classes seen in this window
        self._marked: set[type] = set()  # the classes whose `_init_group` is wrapped now

    def install(self) -> None:
        if self.active:
            return
        self.owner = get_ident()
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        handle = register_optimizer_step_pre_hook(self._pre_hook)
        self._undo.append(handle.remove)
        self._wrap_clipping()
        scaler = getattr(torch.amp, "GradScaler", None)
        for name in ("unscale_", "step", "update") if scaler is not None else ():
            self._wrap_attribute(scaler, name, SCALER_RANGE)
        self._wrap_attribute(nn.Module, "zero_grad", ZERO_GRAD_RANGE)
        self.active = True
        with _LIVE_LOCK:
            _LIVE[id(self)] = "optimizer, clipping and GradScaler ranges"

    def uninstall(self) -> None:
        self.active = False
        try:
            while self._undo:
                self._undo.pop()()
        finally:
            self._seen.clear()
            self._marked.clear()
            with _LIVE_LOCK:
                _LIVE.pop(id(self), None)

    # -- what is wrapped

    def _wrap_clipping(self) -> None:
        from torch.nn.utils import clip_grad

        # each private name with its public alias in torch.nn.utils (the same function object),
        # which accelerate's dtensor-aware clipping imports at each call
        private = {
            "_get_total_norm": "get_total_norm",
            "_clip_grads_with_norm_": "clip_grads_with_norm_",
        }
        if all(callable(getattr(clip_grad, name, None)) for name in private):
            for name, alias in private.items():
                self._wrap_with_alias(clip_grad, name, alias)
        else:  # an older torch: the public names (a function imported before is not caught)
            self._wrap_public(clip_grad, "clip_grad_norm_")
        self._wrap_public(clip_grad, "clip_grad_value_")

    def _wrap_with_alias(self, module: Any, name: str, alias: str) -> None:
        """`module.<name>` and, where it is the same function, `torch.nn.utils.<alias>`: one
        wrapper for both, so a call through either name is one range."""
        original = getattr(module, name)
        wrapper = self._ranged(original, CLIP_RANGE)
        self._replace(module, name, original, wrapper)
        if getattr(torch.nn.utils, alias, None) is original:
            self._replace(torch.nn.utils, alias, original, wrapper)

    def _wrap_public(self, module: Any, name: str) -> None:
        """`torch.nn.utils.<name>` and `torch.nn.utils.clip_grad.<name>`, one wrapper for both."""
        original = getattr(module, name, None)
        if original is None:
            return
        wrapper = self._ranged(original, CLIP_RANGE)
        for owner in (module, torch.nn.utils):
            if getattr(owner, name, None) is original:
                self._replace(owner, name, original, wrapper)

    def _wrap_attribute(self, owner: Any, name: str, range_name: str) -> None:
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
        if original is not None:
            self._replace(owner, name, original, self._ranged(original, range_name))

    def _replace(self, owner: Any, name: str, original: Any, wrapper: Any) -> None:
        setattr(owner, name, wrapper)

        def put_back() -> None:
            current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
            if current is wrapper:  # else something replaced it since: leave that alone
                setattr(owner, name, original)

        self._undo.append(put_back)

    def _ranged(self, original: Callable[..., Any], range_name: str) -> Callable[..., Any]:
        """`original` inside a range named `range_name` while a window records this thread."""
        hooks = self

        @functools.wraps(original)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            if not hooks.active or get_ident() != hooks.owner:
                return original(*args, **kwargs)
            with hooks.make_range(range_name):
                return original(*args, **kwargs)

        return ranged

    # -- the optimizer step pre-hook

    def _pre_hook(
        self, optimizer: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        if not self.active or get_ident() != self.owner:
            return None
        self.optimizer_steps += 1
        self._mark_groups(type(optimizer))
        if "closure" in kwargs and kwargs["closure"] is not None:
            return args, {**kwargs, "closure": self._closure(kwargs["closure"])}
        if len(args) > 1 and args[1] is not None:
            return (args[0], self._closure(args[1]), *args[2:]), kwargs
        return None

    def _closure(self, closure: Callable[[], Any]) -> Callable[[], Any]:
        make_range = self.make_range

        @functools.wraps(closure)
        def in_range() -> Any:
            with make_range(CLOSURE_RANGE):
                return closure()

        return in_range

    def _mark_groups(self, cls: type) -> None:
        """Wrap `_init_group` of the class that defines it for `cls` (once per window)."""
        if cls in self._seen:
            return
        self._seen.add(cls)
        owner = next((k for k in cls.__mro__ if "_init_group" in k.__dict__), None)
        if owner is None or owner in self._marked:
            return
        self._marked.add(owner)
        original = owner.__dict__["_init_group"]
        if not callable(original):
            return
        hooks = self

        @functools.wraps(original)
        def marked(optimizer: Any, group: Any, *args: Any, **kwargs: Any) -> Any:
            if hooks.active and get_ident() == hooks.owner:
                index = next((i for i, g in enumerate(optimizer.param_groups) if g is group), -1)
                with hooks.make_range(f"{GROUP_PREFIX}{index}"):
                    pass
            return original(optimizer, group, *args, **kwargs)

        self._replace(owner, "_init_group", original, marked)


__all__ = ["TrainingHooks", "live_hooks"]
