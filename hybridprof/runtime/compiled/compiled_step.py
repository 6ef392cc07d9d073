"""A compiled function that calls the model: `train_step = torch.compile(train_step)`.

A loop that compiles its whole step (forward, loss, `backward()`, `optimizer.step()`, `zero_grad()`)
calls neither the model's `forward` nor a compiled wrapper of it: dynamo traces the model inside
the step's frame. What torch 2.13 makes of such a step (tried, not assumed):

- `loss.backward()` is a graph break: the step's first frame compiles the forward and the loss
  into one graph (AOTAutograd compiles its backward with it, whose nodes carry the forward's
  `fwd_nn_module_stack`); the backward runs eagerly through that compiled backward
  (`CompiledFunctionBackward`), and the gradients are accumulated eagerly (`AccumulateGrad`);
- the rest of the step resumes in frames of its own: `optimizer.step()` compiles into a graph of
  its own (the frame of torch's `Adam.step`, after two graph breaks in torch's step wrapper),
  whose FX nodes have no module but a stack trace in `torch/optim/`; `Optimizer.zero_grad` is
  skipped by dynamo and runs eagerly, inside torch's own `Optimizer.zero_grad#...` range.

So the step's kernels are mapped like a compiled model's (instrument.py's hook on inductor's
codegen): a kernel of the model's nodes is its layer's (forward, or backward under
`CompiledFunctionBackward`), a kernel of optimizer code is the optimizer's, and a kernel of the
step's own code (the loss) is outside every layer.

Found the way a compiled wrapper is (detect.py's `compiled_wrapper_of`): one scan of the live
objects when the block begins, for the functions `torch.compile` returned (they keep the
function they compile as `_torchdynamo_orig_callable`) whose function names the model by a global
or a closure variable. A step that gets the model as an argument is not found (its layers ran
inside compiled code, and the block says so as before). Nothing inside the step is patched:
dynamo guards on the modules it traced, and on the optimizer's hooks and methods, so a patch there
would make the step compile again inside the block and again after it.

A step that ran before the block (the loop compiled it at its first step) has its code in
dynamo's cache, and the profile would see no codegen. `compiled_again` swaps the backend the
step's entry point hands dynamo (the `callback` its closure holds) for the same backend behind
another identity (compile_again.py's `HookedBackend`) while the block runs: dynamo compiles each
of the step's frames again into entries of their own, with codegen hooked, and the user's entries
are used again once the callback is put back: the step's next call after the block compiles
nothing.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from hybridprof.planner.module_tree import every_module
from hybridprof.runtime.compiled.compile_again import code_is_warm, hooked_backend
from hybridprof.runtime.compiled.detect import (
    CompiledLayout,
    CompiledPart,
    backend_object,
    clean_path,
    part_of,
)

ORIGINAL = "_torchdynamo_orig_callable"  # what a torch.compile'd function compiles
CALLBACK = "callback"  # the closure variable of dynamo's entry point that names the backend


@dataclass(frozen=True, slots=True)
class CompiledStep:
    """A `torch.compile`d function that calls the model: its entry point (what the user calls),
    the function it compiles, dynamo's context, and the optimizer classes it names."""

    entry: types.FunctionType
    function: types.FunctionType
    context: Any
    optimizer: str  # the class of the one optimizer it names, else "compiled"

    @property
    def name(self) -> str:
        return self.function.__name__

    def part(self) -> CompiledPart:
        kind = f"torch.compile({self.name}), a function calling the model"
        return part_of("", kind, self.context)


def compiled_step_of(model: nn.Module) -> CompiledStep | None:
    """The newest live `torch.compile`d function whose code names `model` (by a global it reads
    or a variable it closes over); None: none, or dynamo is not loaded."""
    if "torch._dynamo.eval_frame" not in sys.modules:
        return None
    found = None
    for obj in gc.get_objects():  # type() never runs user code, unlike isinstance on a proxy
        if type(obj) is not types.FunctionType:
            continue
        function = obj.__dict__.get(ORIGINAL)
        if type(function) is not types.FunctionType or not _entry_of_dynamo(obj):
            continue
        named = list(_named_objects(function))
        if any(value is model for value in named):
            found = CompiledStep(obj, function, _context(obj), _optimizer_class(named))
    return found


def step_layout(model: nn.Module, step: CompiledStep) -> CompiledLayout:
    """The model as the step runs it: every module inside compiled code (none patched), with its
    path by identity (the key dynamo writes into `nn_module_stack`)."""
    paths: dict[str, str] = {}
    for raw_path, module in every_module(model):
        paths.setdefault(str(id(module)), clean_path(raw_path))
    return CompiledLayout(
        parts=(step.part(),),
        inside=frozenset(id(module) for module in model.modules()),
        call_impl=frozenset(),
        paths=paths,
    )


@contextlib.contextmanager
def compiled_again(step: CompiledStep) -> Iterator[tuple[str, ...]]:
    """A step whose code ran compiled before the block compiled again, hooked, while the block
    runs (its name is yielded; nothing when it is cold or cannot be swapped); its own backend
    callback put back after, exactly."""
    cell = _callback_cell(step.entry)
    backend = backend_object(step.context)
    if cell is None or backend is None or not code_is_warm(step.function.__code__, backend):
        yield ()
        return
    import torch

    own = torch.compile(
        step.function,
        backend=hooked_backend(backend),
        fullgraph=bool(getattr(step.context, "fullgraph", False)),
        dynamic=getattr(backend, "dynamic", None),
    )
    own_cell = _callback_cell(own)
    if own_cell is None:
        yield ()
        return
    original = cell.cell_contents
    cell.cell_contents = own_cell.cell_contents
    try:
        yield (f"{step.name}()",)
    finally:
        cell.cell_contents = original


def _callback_cell(entry: Any) -> Any:
    """The cell of dynamo's entry point that holds the callback it compiles frames with."""
    code = getattr(entry, "__code__", None)
    closure = getattr(entry, "__closure__", None) or ()
    if code is None or CALLBACK not in code.co_freevars:
        return None
    cell = closure[code.co_freevars.index(CALLBACK)]
    try:
        return cell if callable(cell.cell_contents) else None
    except ValueError:  # an empty cell
        return None


def _entry_of_dynamo(entry: types.FunctionType) -> bool:
    """The function is dynamo's entry point (eval_frame.py's), not a user's decorator copy."""
    module = sys.modules["torch._dynamo.eval_frame"]
    return getattr(entry.__code__, "co_filename", None) == module.__file__


def _context(entry: types.FunctionType) -> Any:
    """The dynamo context of an entry point (its closure's `self`)."""
    code = entry.__code__
    if "self" not in code.co_freevars or not entry.__closure__:
        return None
    try:
        return entry.__closure__[code.co_freevars.index("self")].cell_contents
    except ValueError:
        return None


def _named_objects(function: types.FunctionType) -> Iterator[Any]:
    """What a function's code can reach by name: the globals it reads (in nested code too) and
    the variables it closes over."""
    for cell in function.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    scope = function.__globals__
    for name in _global_names(function.__code__):
        if name in scope:
            yield scope[name]


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _optimizer_class(named: list[Any]) -> str:
    import torch

    classes = {type(v).__name__ for v in named if isinstance(v, torch.optim.Optimizer)}
    return next(iter(classes)) if len(classes) == 1 else "compiled"


__all__ = ["CompiledStep", "compiled_again", "compiled_step_of", "step_layout"]
