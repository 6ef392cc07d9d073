"""Tensor-parallel layers (DTensor, `parallelize_module`): which modules are, their process group,
and the range hybridprof opens around each one's call so its hooks' communication is its own.

A module is tensor parallel when DTensor's `distribute_module` gave it its hooks (the functions
live in `torch.distributed.tensor`): ColwiseParallel, RowwiseParallel, SequenceParallel and the
rest all go through it. Its group is read from its DTensor parameters' mesh: the mesh's dimension
names and each dimension's process group description (`group_desc`, "default_pg" when a 1-D mesh
spans the world).

The range is opened by a forward pre-hook put first and closed by a forward hook put last (run
even when the forward raises), so DTensor's own hooks run inside it; both are removed when the
patches are undone (the handles' `remove`), so the model keeps exactly the hooks it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hybridprof.runtime.events.tp_names import tp_hooks_range

_DTENSOR_MODULE = "torch.distributed.tensor"


def tp_layers(model: nn.Module, paths: Sequence[str]) -> dict[str, str]:
    """The tensor-parallel modules among `paths` (paths of `model.named_modules()`), each with its
    process group as said in a report (`mesh dim tp, group default_pg`)."""
    wanted = set(paths)
    return {
        path: _group_of(module)
        for path, module in model.named_modules()
        if path in wanted and _has_dtensor_hooks(module)
    }


def _has_dtensor_hooks(module: nn.Module) -> bool:
    hooks = [*module._forward_pre_hooks.values(), *module._forward_hooks.values()]
    return any(getattr(h, "__module__", "").startswith(_DTENSOR_MODULE) for h in hooks)


def _group_of(module: nn.Module) -> str:
    """The mesh of the module's DTensor parameters, as dimension names and group descriptions;
    "" when it has none (a module that only redistributes its inputs)."""
    for param in module.parameters(recurse=False):
        mesh = getattr(param, "device_mesh", None)
        if mesh is None:
            continue
        names = mesh.mesh_dim_names or tuple(str(d) for d in range(mesh.ndim))
        groups = [_desc(mesh, dim) for dim in range(mesh.ndim)]
        return ", ".join(f"mesh dim {n}, group {g}" for n, g in zip(names, groups, strict=True))
    return ""


def _desc(mesh: Any, dim: int) -> str:
    try:
        group = mesh.get_group(dim)
    except (RuntimeError, ValueError):  # a rank outside the group
        return "?"
    return str(getattr(group, "group_desc", "") or getattr(group, "group_name", "?"))


class HookRanges:
    """Each of `paths` (tensor-parallel modules of `model`) called inside `tp_hooks_range(path)`,
    hooks included, from `install` to `uninstall` (the patched window's span)."""

    def __init__(self, model: nn.Module, paths: Sequence[str]) -> None:
        modules = dict(model.named_modules())
        self._modules = [(path, modules[path]) for path in paths]
        self._handles: list[Any] = []

    def install(self) -> None:
        for path, module in self._modules:
            opened: list[Any] = []  # a stack: a module may be called inside its own call
            self._handles.append(
                module.register_forward_pre_hook(_opener(path, opened), prepend=True)
            )
            self._handles.append(module.register_forward_hook(_closer(opened), always_call=True))

    def uninstall(self) -> None:
        handles, self._handles = self._handles, []
        for handle in reversed(handles):
            handle.remove()


def _opener(path: str, opened: list[Any]) -> Any:
    name = tp_hooks_range(path)

    def open_range(module: nn.Module, args: Any) -> None:
        opened.append(torch.ops.profiler._record_function_enter_new(name, None))

    return open_range


def _closer(opened: list[Any]) -> Any:
    def close_range(module: nn.Module, args: Any, output: Any) -> None:
        if opened:
            torch.ops.profiler._record_function_exit._RecordFunction(opened.pop())

    return close_range


__all__ = ["HookRanges", "tp_layers"]
