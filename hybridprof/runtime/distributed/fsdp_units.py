"""The FSDP2 units of a model (modules `fully_shard` sharded) and the bytes each one's collectives
move, read from the unit's FSDP parameter group.

Per call, a unit's all-gather gives each rank the whole padded unsharded parameters: the sum over
its parameters of the padded shard's elements times the shard group's size, in the dtype the
gather runs in (`MixedPrecisionPolicy.param_dtype`, else the parameter's own). Its reduce-scatter
takes the same number of gradient elements in the reduce dtype (`reduce_dtype`, else the gather's
dtype). These are the collectives' own buffer sizes, not estimates from event shapes.

The parameter group is FSDP2's internal state (`_get_fsdp_state()._fsdp_param_group`): a unit
whose state does not look as torch 2.x has it is left out (its row then shows its times and no
bytes), so a later torch changes figures, never breaks a run.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# (unit path, all-gather bytes per call, reduce-scatter bytes per call)
UnitBytes = tuple[str, int, int]


def fsdp_unit_bytes(model: nn.Module) -> tuple[UnitBytes, ...]:
    """Each FSDP2 unit of `model` (paths as `model.named_modules()` gives them) with the bytes of
    one all-gather and one reduce-scatter of it; () when nothing in it was sharded."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return ()
    found = []
    for path, module in model.named_modules():
        if isinstance(module, FSDPModule):
            sizes = _group_bytes(_param_group(module))
            if sizes is not None:
                found.append((path, *sizes))
    return tuple(found)


def _param_group(module: object) -> Any:
    state_of = getattr(module, "_get_fsdp_state", None)
    state = state_of() if callable(state_of) else None
    return getattr(state, "_fsdp_param_group", None)


def _group_bytes(group: Any) -> tuple[int, int] | None:
    """(all-gather, reduce-scatter) bytes of one call for a parameter group; None when the group
    is not there (a unit with no parameters of its own) or not as expected."""
    world = getattr(getattr(group, "mesh_info", None), "shard_mesh_size", None)
    params = getattr(group, "fsdp_params", None)
    if not isinstance(world, int) or not params:
        return None
    gathered = scattered = 0
    for param in params:
        size = getattr(param, "padded_sharded_param_size", None)
        orig = getattr(param, "orig_dtype", None)
        if not isinstance(size, torch.Size) or not isinstance(orig, torch.dtype):
            return None
        gather_dtype = getattr(param, "param_dtype", None) or orig
        reduce_dtype = getattr(param, "reduce_dtype", None) or gather_dtype
        elements = size.numel() * world
        gathered += elements * gather_dtype.itemsize
        scattered += elements * reduce_dtype.itemsize
    return gathered, scattered


__all__ = ["UnitBytes", "fsdp_unit_bytes"]
