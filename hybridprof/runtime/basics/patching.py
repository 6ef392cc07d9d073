"""Patch the `forward` of selected modules, and undo every change exactly.

Each selected module gets an instance attribute `forward` (a `PatchedForward`) that hands the call
to a strategy: `call(path, original_forward, args, kwargs)`. Patching `forward` rather than
`__call__` keeps `nn.Module.__call__` and so every user hook intact. The undo log restores, in
reverse order: the added attribute is DELETED (assigning a bound method back would leave an instance
attribute that `copy.deepcopy` then carries to copies), a module's own instance `forward` is put
back as that exact object, and train/eval flags changed while patched are reset (unless the
patcher is told to keep them: in a with-block around the user's loop, a mode the user's own code
set, `model.eval()` before an evaluation, is the user's to keep).

A patched model stays copy-safe: an instance forward would otherwise go with every copy and keep
calling the ORIGINAL module (with the original's weights). So each patched module also gets an
instance `__getstate__` (what pickle, `torch.save`, `copy.copy` and `copy.deepcopy` read) and an
instance `_replicate_for_data_parallel` (how `nn.DataParallel` makes its replicas) that leave
hybridprof's attributes out: a copy made while profiling is a plain module of its class, computing
with its own weights, and loads where hybridprof is not installed. Both go with the forward on undo.

Compiled code (runtime/compiled/) is never patched: dynamo guards on `forward` not being an
instance attribute of every module it traces, and would trace the wrapper. `skip` names those
modules; a `module.compile()`d module (in `call_impl`) is wrapped at its instance
`_compiled_call_impl`, which only the eager `Module.__call__` reads, undone the same way. A
patched forward that dynamo traces anyway (a compiled caller hybridprof did not see) just calls
the original, so it adds no graph break.

Only the thread that patched is measured: a call from another thread runs the module's own forward
unmeasured and is counted in `foreign_calls`, so the runner can say so (strategies keep one stack of
open calls; interleaving threads would corrupt it and give negative self times).
"""

from __future__ import annotations

import inspect
import threading
from _thread import get_ident
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import torch
from torch import nn

CallFn = Callable[[str, Callable[..., Any], tuple[Any, ...], Mapping[str, Any]], Any]

# Every module patched right now in this process, by (id(patcher), id(module)): the test suite
# asserts it is empty.
_LIVE: dict[tuple[int, int], str] = {}
_LIVE_LOCK = threading.Lock()


def live_patches() -> tuple[str, ...]:
    """Descriptions (`path (Class)`) of the modules patched right now in this process."""
    with _LIVE_LOCK:
        return tuple(_LIVE.values())


class InertForward:
    """A forward that just runs the module's class `forward`: what copies of a patched module
    get."""

    __slots__ = ("module",)

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return type(self.module).forward(self.module, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (InertForward, (self.module,))


class PatchedForward:
    """The instance `forward` of a patched module: routes each call through the strategy."""

    __slots__ = ("live", "module", "original", "own_forward", "patcher", "path")

    def __init__(
        self,
        patcher: ForwardPatcher,
        path: str,
        module: nn.Module,
        own_forward: Any | None,
    ) -> None:
        self.patcher = patcher
        self.path = path
        self.module = module
        self.own_forward = own_forward
        # The forward Python would call now: the class's, bound; or, for a traced TorchScript
        # module, the one its __getattr__ resolves (its class attribute is no plain function).
        self.original: Callable[..., Any] = (
            own_forward if own_forward is not None else module.forward
        )
        # False once restored: a stray reference (e.g. kept by a shallow copy.copy of the module)
        # then just runs the original forward and never reaches a finished strategy.
        self.live = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.live or _is_compiling():
            return self.original(*args, **kwargs)
        if get_ident() != self.patcher.owner:
            self.patcher.note_foreign_call()
            return self.original(*args, **kwargs)
        try:
            return self.patcher.call(self.path, self.original, args, kwargs)
        except BaseException:
            self.patcher.note_failure(self.path)
            raise

    def _inert(self, module: nn.Module, own_forward: Any | None) -> Any:
        return own_forward if own_forward is not None else InertForward(module)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        import copy

        # The module is registered in `memo` before its __dict__ is copied, so the copy is found.
        clone = memo.get(id(self.module), self.module)
        own = copy.deepcopy(self.own_forward, memo) if self.own_forward is not None else None
        return self._inert(clone, own)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.own_forward is not None:
            return (_identity, (self.own_forward,))
        return (InertForward, (self.module,))


_is_compiling = torch.compiler.is_compiling


def _identity(value: Any) -> Any:
    return value


def _shadowing_forward(module: nn.Module, wrapper: PatchedForward) -> str | None:
    """What on the module's class wins over its instance `forward` (a `property`, or another
    data descriptor), so that calling the module never reaches `wrapper`; None when the patch
    takes effect."""
    try:
        if module.forward is wrapper:
            return None
    except Exception:  # a property whose getter raises: the module cannot run either way
        pass
    found = inspect.getattr_static(type(module), "forward", None)
    kind = "a property" if isinstance(found, property) else f"a {type(found).__name__} descriptor"
    return f"{kind} of {type(module).__name__}"


# Instance attributes a patch adds besides `forward`; copies must not carry any of them.
COPY_GUARDS = ("__getstate__", "_replicate_for_data_parallel")


class _StateWithoutPatch:
    """The module's `__getstate__` while patched: its class's state, hybridprof's attributes out."""

    __slots__ = ("module", "own_forward")

    def __init__(self, module: nn.Module, own_forward: Any | None) -> None:
        self.module = module
        self.own_forward = own_forward

    def __call__(self) -> Any:
        class_getstate: Callable[[nn.Module], Any] = type(self.module).__getstate__
        state = class_getstate(self.module)
        return without_patch(state, self.own_forward) if isinstance(state, dict) else state


class _ReplicaWithoutPatch:
    """The module's `_replicate_for_data_parallel` while patched: a replica without the patch."""

    __slots__ = ("module", "own_forward")

    def __init__(self, module: nn.Module, own_forward: Any | None) -> None:
        self.module = module
        self.own_forward = own_forward

    def __call__(self) -> nn.Module:
        replicate: Callable[[nn.Module], nn.Module] = type(self.module)._replicate_for_data_parallel
        replica = replicate(self.module)
        replica.__dict__ = without_patch(replica.__dict__, self.own_forward)
        return replica


def without_patch(state: dict[str, Any], own_forward: Any | None) -> dict[str, Any]:
    """A module `__dict__` (copy) with the patch's attributes out and the own forward back."""
    clean = {
        key: value
        for key, value in state.items()
        if not isinstance(value, PatchedForward | _StateWithoutPatch | _ReplicaWithoutPatch)
    }
    if own_forward is not None:
        clean["forward"] = own_forward
    return clean


@dataclass(frozen=True, slots=True)
class _Patch:
    path: str
    module: nn.Module
    wrapper: PatchedForward
    own_forward: Any | None  # the module's own instance forward before patching, if any
    guards: tuple[tuple[str, Any], ...]  # the copy guards added (name, object)
    attribute: str = "forward"  # or "_compiled_call_impl" (a module.compile()d module)


class ForwardPatcher:
    """Patches `paths` of `model` so each call goes through `call`; `restore()` undoes everything.

    `failed_path` is the innermost patched path an exception passed through (the first one seen),
    so the driver can say which layer failed; the exception itself propagates unchanged.
    """

    def __init__(
        self,
        model: nn.Module,
        paths: Iterable[str],
        call: CallFn,
        *,
        reset_modes: bool = True,
        skip: frozenset[int] = frozenset(),
        call_impl: frozenset[int] = frozenset(),
    ) -> None:
        self.model = model
        self.skip = skip  # ids of modules inside compiled code: never patched
        self.call_impl = call_impl  # ids of module.compile()d modules: patched at that entry
        self.paths = tuple(dict.fromkeys(paths))
        self.call = call
        self.reset_modes = reset_modes
        self.failed_path: str | None = None
        self.owner = 0  # the thread that patched: the one measured
        self.foreign_calls = 0  # calls from other threads, run unmeasured
        self._foreign_lock = threading.Lock()
        self._patches: list[_Patch] = []
        self._modes: list[tuple[nn.Module, bool]] = []
        self.unpatchable: dict[str, str] = {}  # path -> why its patch cannot take effect
        self.replaced: dict[str, int] = {}  # path -> measured steps it replaced its forward in

    def note_foreign_call(self) -> None:
        with self._foreign_lock:
            self.foreign_calls += 1

    def note_failure(self, path: str) -> None:
        if self.failed_path is None:
            self.failed_path = path

    def patch(self) -> None:
        """Patch every path once (a module reached twice is patched at its first path)."""
        self.failed_path = None
        self.foreign_calls = 0
        self.replaced = {}
        self.patch_again()

    def patch_again(self) -> None:
        """Patch as `patch` does, keeping what the run has recorded so far (a failed path, calls
        from other threads, forwards the model replaced): after a pause with the patches off
        within one run (the bare steps), so that what the measured steps saw is still said."""
        if self._patches:
            raise RuntimeError("this patcher is already active; restore() it first")
        self.owner = get_ident()
        self.unpatchable = {}
        self._modes = [(m, m.training) for m in self.model.modules()] if self.reset_modes else []
        seen: set[int] = set()
        try:
            for path in self.paths:
                module = self.model.get_submodule(path) if path else self.model
                if id(module) not in seen and id(module) not in self.skip:
                    seen.add(id(module))
                    self._patch_one(path, module)
        except BaseException:
            self.restore()
            raise

    def _patch_one(self, path: str, module: nn.Module) -> None:
        if id(module) in self.call_impl:
            self._patch_call_impl(path, module)
            return
        own = module.__dict__.get("forward")
        wrapper = PatchedForward(self, path, module, own)
        guards = {
            name: guard
            for name, guard in zip(
                COPY_GUARDS,
                (_StateWithoutPatch(module, own), _ReplicaWithoutPatch(module, own)),
                strict=True,
            )
            if name not in module.__dict__  # a module's own instance attribute is left alone
        }
        module.__dict__["forward"] = wrapper
        module.__dict__.update(guards)
        self._patches.append(_Patch(path, module, wrapper, own, tuple(guards.items())))
        with _LIVE_LOCK:
            _LIVE[(id(self), id(module))] = f"{path or '(root)'} ({type(module).__name__})"
        shadow = _shadowing_forward(module, wrapper)
        if shadow is not None:
            self.unpatchable[path] = shadow

    def rewrap_replaced(self, measured: bool) -> None:
        """Patch again every module whose forward the model replaced (`self.forward = ...` in a
        forward): the instance attribute that was the patch is now the model's, so its calls
        would go unmeasured. Called after each step (cheap: one lookup per patched module).
        `measured`: the step was a measured one, which then missed the calls made after the
        replacement (said in `patch_warnings`)."""
        for index, patch in enumerate(self._patches):
            current = patch.module.__dict__.get(patch.attribute)
            if current is patch.wrapper:
                continue
            if measured:
                self.replaced[patch.path] = self.replaced.get(patch.path, 0) + 1
            # The model's own forward now: restore() puts it back, as the model left it.
            own = current.own_forward if isinstance(current, PatchedForward) else current
            wrapper = PatchedForward(self, patch.path, patch.module, own)
            patch.module.__dict__[patch.attribute] = wrapper
            for _, guard in patch.guards:
                guard.own_forward = own
            self._patches[index] = replace(patch, wrapper=wrapper, own_forward=own)

    def patch_warnings(self) -> tuple[str, ...]:
        """What the session should say about forwards hybridprof could not measure throughout."""
        said = [
            f"{path or '(root)'}: its forward is {why}, which hybridprof cannot patch (an "
            "instance attribute cannot override it), so it is not measured: its time counts in "
            + ("its parent's self time" if path else "the time outside the profiled modules")
            for path, why in self.unpatchable.items()
        ]
        said += [
            f"{path or '(root)'} replaced its own forward (self.forward = ...) during "
            f"{count} measured iteration{'s' if count > 1 else ''}: its calls after that in "
            f"{'those iterations' if count > 1 else 'that iteration'} are not measured "
            "(hybridprof wraps the new forward from the next step on)"
            for path, count in self.replaced.items()
        ]
        return tuple(said)

    def _patch_call_impl(self, path: str, module: nn.Module) -> None:
        """A module.compile()d module: the range around its compiled entry, not its forward
        (which dynamo traces)."""
        compiled = module.__dict__["_compiled_call_impl"]
        wrapper = PatchedForward(self, path, module, compiled)
        module.__dict__["_compiled_call_impl"] = wrapper
        self._patches.append(_Patch(path, module, wrapper, compiled, (), "_compiled_call_impl"))
        with _LIVE_LOCK:
            _LIVE[(id(self), id(module))] = f"{path or '(root)'} ({type(module).__name__})"

    def restore(self) -> None:
        """Undo every patch in reverse order, then reset changed train/eval flags (when
        `reset_modes`)."""
        while self._patches:
            self._unpatch_one(self._patches.pop())
        for module, training in self._modes:
            if module.training != training:
                module.training = training
        self._modes = []

    def _unpatch_one(self, patch: _Patch) -> None:
        patch.wrapper.live = False
        for name, guard in patch.guards:
            if patch.module.__dict__.get(name) is guard:
                del patch.module.__dict__[name]
        current = patch.module.__dict__.get(patch.attribute)
        if current is not patch.wrapper:
            # Replaced by the model since the last check (the library's with-block has no steps
            # to check after): its calls after that went unmeasured.
            self.replaced[patch.path] = self.replaced.get(patch.path, 0) + 1
        if current is patch.wrapper:
            if patch.own_forward is None:
                del patch.module.__dict__[patch.attribute]
            else:
                patch.module.__dict__[patch.attribute] = patch.own_forward
        with _LIVE_LOCK:
            _LIVE.pop((id(self), id(patch.module)), None)

    def __enter__(self) -> ForwardPatcher:
        self.patch()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()


__all__ = ["ForwardPatcher", "InertForward", "PatchedForward", "live_patches"]
