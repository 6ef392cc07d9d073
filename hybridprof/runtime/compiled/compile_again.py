"""Compiled code that ran before hybridprof saw it, compiled again for the profile, hooked.

The kernel map exists only if inductor's codegen runs under hybridprof's hook, and dynamo never
compiles a frame twice: a model `torch.compile`d (or `module.compile()`d) and called before the
profile has its code in dynamo's cache, so the profile's warm-up compiles nothing. What is sound:

Dynamo keeps a list of cache entries per code object, each with the backend that compiled it, and
runs an entry only for the backend of the caller's compiled entry point (its backend-match check:
a different backend is a cache miss, not a replacement). So for the profile each warm compiled
entry point (an `OptimizedModule`'s `forward`, a `module.compile()`d module's
`_compiled_call_impl`) is swapped for `torch.compile` of the same code with `HookedBackend`: the
user's own backend object (same mode, same options) behind another identity. Dynamo compiles the
frames again into entries of their own, with codegen hooked; the user's entries stay cached and
are used again as soon as the user's entry point is put back, after the profile: the model's next
call compiles nothing. One `HookedBackend` per user backend, kept for the process, so a second
profile finds hybridprof's entries cached too (its map is the one recorded the first time).

The cost: one more cache entry per code object, which counts toward dynamo's `recompile_limit`;
a frame at that limit runs eagerly for the profile (said by the run as eager code).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.runtime.compiled.detect import (
    MODULE_COMPILE,
    OWN_WRAPPERS,
    CompiledPart,
    backend_object,
    compiled_roots,
)
from hybridprof.runtime.compiled.instrument import SiteRecorder

_ENTRY_ATTRIBUTE = {MODULE_COMPILE: "_compiled_call_impl"}  # else an OptimizedModule's forward


class HookedBackend:
    """The user's backend under another identity: dynamo keeps its compiles apart."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, graph: Any, example_inputs: Any) -> Any:
        return self.inner(graph, example_inputs)

    def __repr__(self) -> str:
        return f"hybridprof's hooked compile with {self.inner!r}"


_BACKENDS: dict[int, HookedBackend] = {}  # id(user's backend) -> its HookedBackend (kept alive)


def hooked_backend(inner: Any) -> HookedBackend:
    found = _BACKENDS.get(id(inner))
    if found is None or found.inner is not inner:
        found = _BACKENDS[id(inner)] = HookedBackend(inner)
    return found


def own_recompile(reason: str) -> bool:
    """A recompile reason that is hybridprof's compile again (another backend, not a guard)."""
    return "BACKEND_MATCH" in reason


@dataclass(frozen=True, slots=True)
class _Swap:
    owner: nn.Module
    attribute: str
    new: Any


def warm(module: nn.Module, backend: Any) -> bool:
    """The module's forward has code in dynamo's cache compiled by `backend` (the user's) that
    hybridprof's hook did not see compiled (an entry made in an earlier profile is mapped)."""
    inner = getattr(module, "_orig_mod", module)
    forward = getattr(type(inner), "forward", None)
    code = getattr(inspect.unwrap(forward), "__code__", None) if forward is not None else None
    return code is not None and code_is_warm(code, backend)


def code_is_warm(code: Any, backend: Any) -> bool:
    """dynamo's cache holds code of `code` compiled by `backend` that hybridprof's hook did not
    see compiled."""
    eval_frame = sys.modules.get("torch._C._dynamo.eval_frame")
    if eval_frame is None:
        return False
    try:
        entries = eval_frame._debug_get_cache_entry_list(code)
    except Exception:  # a torch without it: nothing known to be warm (the old way: opaque)
        return False
    mapped = SiteRecorder().compiles
    return any(
        _same_backend(getattr(entry, "backend", None), backend) and _compile_id(entry) not in mapped
        for entry in entries
    )


def _same_backend(found: Any, backend: Any) -> bool:
    """Dynamo runs an entry for an equal backend too: two `torch.compile` calls with the same
    settings make two inductor backends that compare equal, and share their entries."""
    try:
        return found is backend or bool(found == backend)
    except Exception:  # a backend whose comparison fails: only itself
        return False


def _compile_id(entry: Any) -> str:
    """A cache entry's compile as the hook records it ("frame/compile")."""
    compile_id = getattr(entry, "compile_id", None)
    frame = getattr(compile_id, "frame_id", None)
    return f"{frame}/{getattr(compile_id, 'frame_compile_id', None)}"


def _warm_roots(model: nn.Module) -> list[tuple[CompiledPart, nn.Module, Any]]:
    """The compiled parts (inductor's) whose code ran compiled already: (part, module, backend)."""
    found = []
    for part, module, context in compiled_roots(model):
        backend = backend_object(context)
        if part.backend == "inductor" and backend is not None and warm(module, backend):
            found.append((part, module, backend))
    return found


def warm_paths(model: nn.Module) -> frozenset[str]:
    """The paths of the parts a profile compiles again (they ran compiled before it)."""
    return frozenset(part.path for part, _, _ in _warm_roots(model))


def _swaps(model: nn.Module) -> list[tuple[str, _Swap]]:
    """For each warm compiled part: its path and the hooked entry point to swap in."""
    import torch

    swaps: list[tuple[str, _Swap]] = []
    for part, module, user_backend in _warm_roots(model):
        attribute = _ENTRY_ATTRIBUTE.get(part.kind) or _forward_attribute(module)
        options: dict[str, Any] = {"fullgraph": part.fullgraph, "dynamic": part.dynamic}
        backend = hooked_backend(user_backend)
        if part.kind == MODULE_COMPILE:  # what `Module.compile()` itself compiles
            with _attributes_kept(module):
                new = torch.compile(module._call_impl, backend=backend, **options)
        else:  # a new wrapper's entry: the same choice of frame as the user's wrapper made
            eager: nn.Module = module.__dict__["_modules"]["_orig_mod"]
            with _attributes_kept(eager), _attributes_kept(module):
                own = torch.compile(eager, backend=backend, **options)
            OWN_WRAPPERS.add(typing.cast(nn.Module, own))  # not the caller's wrapper
            new = own.__dict__[attribute]
        swaps.append((part.path, _Swap(module, attribute, new)))
    return swaps


@contextlib.contextmanager
def _attributes_kept(module: nn.Module) -> Iterator[None]:
    """The module's attributes as they were after the block: a wrapper of `torch.compile` may
    write to what it compiles (Lightning, once imported, sets `_compile_kwargs` on the wrapper it
    returns, which an OptimizedModule passes on to the model itself), and the model must be left
    exactly as it was."""
    before = dict(vars(module))
    try:
        yield
    finally:
        now = vars(module)
        for name in [name for name in now if name not in before]:
            del now[name]
        for name, value in before.items():
            if now.get(name) is not value:
                now[name] = value


def _forward_attribute(module: nn.Module) -> str:
    """An OptimizedModule's entry: `forward`, or `_forward` behind a lazy module's check."""
    return "_forward" if "_forward" in module.__dict__ else "forward"


@contextlib.contextmanager
def compiled_again(model: nn.Module) -> Iterator[tuple[str, ...]]:
    """Warm compiled parts' entry points swapped for hooked ones while the block runs (their
    paths are yielded); every swapped attribute put back exactly as it was."""
    swaps = _swaps(model)
    saved: list[tuple[_Swap, Any]] = []
    try:
        for _, swap in swaps:
            saved.append((swap, swap.owner.__dict__[swap.attribute]))
            swap.owner.__dict__[swap.attribute] = swap.new
        yield tuple(path for path, _ in swaps)
    finally:
        for swap, original in reversed(saved):
            swap.owner.__dict__[swap.attribute] = original


__all__ = [
    "HookedBackend",
    "code_is_warm",
    "compiled_again",
    "hooked_backend",
    "own_recompile",
    "warm",
    "warm_paths",
]
