"""`hybridprof run --fsdp`: the entry's model sharded with FSDP2's `fully_shard`, unit by unit,
before it is profiled as a with-block around a sharded model is.

The default units are each child of every `nn.ModuleList` (a transformer's blocks), then the root
(which holds what is left: embeddings, the head), all on one mesh over the process group's ranks
and the rank's device. `--fsdp-wrap FILE.py:FUNCTION` (or `package.module:FUNCTION`) calls the
user's function with the model instead: it shards the model in place, as a training script does
(`fully_shard(block)` per unit, then `fully_shard(model)`).

Sharding is the one change made to the model: it stays sharded after the run (FSDP2 turns each
unit's class into an FSDP one and its parameters into DTensor shards, as in the user's own loop),
and hybridprof's patches come off as in any run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hybridprof.errors import UsageError
from hybridprof.files.loader import find_callable, import_model_file, keeping_cwd

WrapFn = Callable[[nn.Module], Any]


def default_units(model: nn.Module) -> list[str]:
    """The paths of each child of every ModuleList in `model`, in module order (the root is
    sharded after them)."""
    return [
        f"{path}.{name}" if path else name
        for path, module in model.named_modules()
        if isinstance(module, nn.ModuleList)
        for name, _ in module.named_children()
    ]


def load_wrap(spec: str) -> WrapFn:
    """The function `--fsdp-wrap FILE.py:FUNCTION` (or `module:FUNCTION`) names."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise UsageError(
            f"--fsdp-wrap {spec!r} names no function; give FILE.py:FUNCTION or module:FUNCTION"
        )
    if where.endswith(".py"):
        module = import_model_file(where)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise UsageError(
                f"--fsdp-wrap: module {where!r} cannot be imported ({exc}); give FILE.py:FUNCTION"
            ) from exc
    return find_callable(module, name, where, "--fsdp-wrap function")  # type: ignore[no-any-return]


def shard(model: nn.Module, device: torch.device, wrap: WrapFn | None, spec: str = "") -> list[str]:
    """Shard `model` in place (the default units, or `wrap`'s); the paths of its FSDP2 units."""
    try:
        from torch.distributed.fsdp import FSDPModule, fully_shard
    except ImportError as exc:  # a torch without FSDP2
        raise UsageError(
            f"--fsdp needs torch.distributed.fsdp.fully_shard (torch 2.6 or later): {exc}"
        ) from exc
    if wrap is None:
        from torch.distributed import get_world_size
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (get_world_size(),))
        for path in default_units(model):
            fully_shard(model.get_submodule(path), mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        _call_wrap(wrap, model, spec)
    units = [path for path, module in model.named_modules() if isinstance(module, FSDPModule)]
    if not units:
        raise UsageError(
            f"--fsdp-wrap {spec} sharded nothing: call fully_shard on each unit and then on the "
            "model in it"
        )
    return units


def _call_wrap(wrap: WrapFn, model: nn.Module, spec: str) -> None:
    try:
        with keeping_cwd():
            returned = wrap(model)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        raise UsageError(
            f"--fsdp-wrap {spec} raised {type(exc).__name__}: {exc}; fix the wrap function"
        ) from exc
    if returned is not None and returned is not model:
        raise UsageError(
            f"--fsdp-wrap {spec} returned another object than the model it was given; shard the "
            "model in place (fully_shard does) and return nothing or the model"
        )


__all__ = ["WrapFn", "default_units", "load_wrap", "shard"]
