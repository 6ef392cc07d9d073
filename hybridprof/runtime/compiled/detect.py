"""Where a model has compiled code, and what compiled it.

Cheap and exact: no call is made. `torch.compile(module)` wraps the module in an
`OptimizedModule` (the eager module is its `_orig_mod`, and `named_modules` inserts `_orig_mod.`
into every path below it: hybridprof's paths leave that segment out); `module.compile()` stores
`torch.compile(self._call_impl)` as the instance attribute `_compiled_call_impl`, which
`Module.__call__` calls first. Both may sit anywhere in the tree.

Nothing here imports `torch._dynamo` unless it is imported already: a process that never
compiled anything has no compiled code (and importing dynamo costs ~1 s).
"""

from __future__ import annotations

import gc
import sys
import weakref
from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.planner.module_tree import every_module

TORCH_COMPILE = "torch.compile(module)"
MODULE_COMPILE = "module.compile()"


@dataclass(frozen=True, slots=True)
class CompiledPart:
    """One compiled module: its hybridprof path, how it was compiled, and with what."""

    path: str
    kind: str  # TORCH_COMPILE or MODULE_COMPILE
    backend: str  # "inductor", "aot_eager", "eager", or a custom backend's name
    mode: str | None  # inductor's mode, recovered from the options it implies
    options: tuple[tuple[str, str], ...] = ()
    fullgraph: bool = False
    dynamic: bool | None = None


@dataclass(frozen=True, slots=True)
class CompiledLayout:
    """The compiled parts of a model and the modules inside them.

    inside: ids of the modules that run inside compiled code (the strict descendants of a
    compiled module, and a `torch.compile` wrapper's `_orig_mod`): dynamo guards on their
    `forward` not being an instance attribute, so they are never patched. A model compiled as a
    whole is not patched either: a range around the compiled call would only add hybridprof's
    Python and the profiler's cost of dynamo's entry (~15 us a call) to the iteration; its rows
    come from its kernels, and the compiled region's glue is outside. call_impl: ids of the
    `module.compile()`d modules, ranged through their `_compiled_call_impl` instead of `forward`.
    paths: `str(id(module))` -> hybridprof path (the key dynamo writes into `nn_module_stack`).
    """

    parts: tuple[CompiledPart, ...]
    inside: frozenset[int]
    call_impl: frozenset[int]
    paths: dict[str, str]

    @property
    def inductor(self) -> bool:
        """Every part compiled by inductor: the only backend whose kernels hybridprof reads."""
        return all(part.backend == "inductor" for part in self.parts)

    def part_at(self, path: str) -> CompiledPart | None:
        """The compiled part whose subtree holds `path` (the innermost one)."""
        found = None
        for part in self.parts:
            holds = part.path == "" or path == part.path or path.startswith(part.path + ".")
            if holds and (found is None or len(part.path) >= len(found.path)):
                found = part
        return found


def clean_path(path: str) -> str:
    """A `named_modules` path without the `_orig_mod` segments `torch.compile` inserts."""
    return ".".join(p for p in path.split(".") if p and p != "_orig_mod")


def is_optimized_module(module: nn.Module) -> bool:
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    return dynamo is not None and isinstance(module, dynamo.OptimizedModule)


def compiled_call_impl(module: nn.Module) -> Any:
    """The `module.compile()` entry of a module (None when it was not compiled that way)."""
    return module.__dict__.get("_compiled_call_impl")


# The `torch.compile` wrappers hybridprof made itself (compile_again.py): never the caller's.
OWN_WRAPPERS: weakref.WeakSet[nn.Module] = weakref.WeakSet()


def compiled_wrapper_of(model: nn.Module) -> nn.Module | None:
    """The `torch.compile(model)` wrapper that the caller keeps and calls while `model` itself is
    eager (a loop's `compiled = torch.compile(model)` with `Profile(model)`, the Hugging Face
    Trainer's `torch_compile=True` with the callback): the newest live `OptimizedModule` whose
    `_orig_mod` is `model`, found in one scan of the live objects (tens of milliseconds), made
    only when dynamo is loaded and `model` has no compiled code of its own. None: no wrapper."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    if dynamo is None or is_optimized_module(model) or compiled_roots(model):
        return None
    wrapper_type = dynamo.OptimizedModule
    found = None
    for obj in gc.get_objects():  # type() never runs user code, unlike isinstance on a proxy
        if not issubclass(type(obj), wrapper_type) or obj in OWN_WRAPPERS:
            continue
        if obj.__dict__["_modules"].get("_orig_mod") is model:
            found = obj  # gc lists objects oldest first: keep the newest wrapper
    return found


def compiled_roots(model: nn.Module) -> list[tuple[CompiledPart, nn.Module, Any]]:
    """Each compiled module of `model`: its part, the module, and the dynamo context compiling it
    (an `OptimizedModule`, or the module whose `_compiled_call_impl` is set), in tree order."""
    if "torch._dynamo" not in sys.modules:
        return []
    roots: list[tuple[CompiledPart, nn.Module, Any]] = []
    for raw_path, module in every_module(model):
        path = clean_path(raw_path)
        if is_optimized_module(module):
            context = getattr(module, "dynamo_ctx", None)
            roots.append((part_of(path, TORCH_COMPILE, context), module, context))
        elif compiled_call_impl(module) is not None:
            context = _context_of(compiled_call_impl(module))
            roots.append((part_of(path, MODULE_COMPILE, context), module, context))
    return roots


def find_compiled(model: nn.Module) -> CompiledLayout | None:
    """The compiled parts of `model` (None: nothing in it is compiled)."""
    roots = compiled_roots(model)
    if not roots:
        return None
    inside: set[int] = set()
    for _, root, _ in roots:
        for sub_path, sub in every_module(root):
            if sub_path:  # the root itself runs eagerly: the wrapper, or Module.__call__
                inside.add(id(sub))
    paths: dict[str, str] = {}
    for raw_path, module in every_module(model):
        paths.setdefault(str(id(module)), clean_path(raw_path))
    call_impl = {id(m) for _, m, _ in roots if compiled_call_impl(m) is not None}
    inside.update(id(m) for _, m, _ in roots if m is model)  # compiled as a whole
    return CompiledLayout(
        parts=tuple(_unique([part for part, _, _ in roots])),
        inside=frozenset(inside),
        call_impl=frozenset(call_impl),
        paths=paths,
    )


def _unique(parts: list[CompiledPart]) -> list[CompiledPart]:
    seen: dict[str, CompiledPart] = {}
    for part in parts:
        seen.setdefault(part.path, part)
    return list(seen.values())


def _context_of(fn: Any) -> Any:
    """The dynamo context a compiled function closes over (None when it has none)."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    if dynamo is None:
        return None
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, dynamo._TorchDynamoContext):
            return value
    return None


def part_of(path: str, kind: str, context: Any) -> CompiledPart:
    """The compiled part at `path`, compiled as `kind` by the dynamo `context`."""
    backend_obj = backend_object(context)
    backend = str(
        getattr(backend_obj, "compiler_name", None)
        or getattr(backend_obj, "__name__", None)
        or type(backend_obj).__name__
    )
    options = dict(getattr(backend_obj, "config", None) or {})
    return CompiledPart(
        path=path,
        kind=kind,
        backend=backend,
        mode=mode_of(options) if backend == "inductor" else None,
        options=tuple(sorted((str(k), repr(v)) for k, v in options.items())),
        fullgraph=bool(getattr(context, "fullgraph", False)),
        dynamic=getattr(backend_obj, "dynamic", None),
    )


def backend_object(context: Any) -> Any:
    """The backend a dynamo context compiles with (the object dynamo's cache entries keep)."""
    if context is None:
        return None
    dynamo = sys.modules["torch._dynamo.eval_frame"]
    try:
        return dynamo.innermost_backend(context.callback)
    except Exception:  # a context of an unknown shape: name what it holds
        return getattr(context, "callback", None)


MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def mode_of(options: dict[str, Any]) -> str:
    """torch.compile keeps the mode only as the options it implies: find the mode that implies
    exactly these ("default" when there are none, "custom options" when no mode fits)."""
    if not options:
        return "default"
    from torch._inductor import list_mode_options

    for mode in MODES:
        implied = list_mode_options(mode)
        if implied and dict(options) == dict(implied):
            return mode
    return "custom options"


__all__ = [
    "MODULE_COMPILE",
    "TORCH_COMPILE",
    "CompiledLayout",
    "CompiledPart",
    "backend_object",
    "clean_path",
    "compiled_roots",
    "find_compiled",
    "is_optimized_module",
    "mode_of",
    "part_of",
]
