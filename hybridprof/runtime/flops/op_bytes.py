"""Bytes an op moves, estimated from its tensors: inputs read plus outputs written.

Views and aliases move nothing, nor does a bare allocation; a broadcast (stride 0) dimension is read
once; a tensor passed twice to one op is read once; an in-place op reads and writes its tensor.
Parameters are inputs like any other, and gradients outputs, so they count where they are used.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

# Metadata queries FlopCounterMode skips too: they compute and move nothing.
METADATA_OPS = {
    getattr(torch.ops.aten, name).default
    for name in (
        "is_contiguous",
        "size",
        "sym_size",
        "stride",
        "sym_stride",
        "storage_offset",
        "sym_storage_offset",
        "numel",
        "sym_numel",
        "dim",
    )
}
# Ops that return (part of) an input without saying so in their schema, and allocations that write
# nothing: no bytes moved.
_ALIAS_OPS = {torch.ops.aten._unsafe_view, torch.ops.aten.lift_fresh, torch.ops.aten.alias}
_NO_DATA_OPS = {
    torch.ops.aten.empty,
    torch.ops.aten.empty_like,
    torch.ops.aten.empty_strided,
    torch.ops.aten.new_empty,
    torch.ops.aten.new_empty_strided,
}


def moves_nothing(func: Any) -> bool:
    """A view (its schema returns an alias of an input), a known alias op, or an allocation."""
    view = any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
    packet = func._overloadpacket
    return view or packet in _ALIAS_OPS or packet in _NO_DATA_OPS


def footprint(tensor: torch.Tensor) -> int:
    """Bytes a kernel reads or writes for `tensor`: broadcast (stride 0) dimensions once."""
    if tensor.layout != torch.strided:
        return 0
    elements = 1
    for size, stride in zip(tensor.shape, tensor.stride(), strict=True):
        if stride != 0 or size == 0:
            elements *= size
    return elements * tensor.element_size()


def bytes_of(args: Any, kwargs: Any, out: Any) -> int:
    inputs, _ = tree_flatten((args, kwargs))
    outputs, _ = tree_flatten(out)
    read = {id(t): t for t in inputs if isinstance(t, torch.Tensor)}
    written = [t for t in outputs if isinstance(t, torch.Tensor)]
    return sum(map(footprint, read.values())) + sum(map(footprint, written))


__all__ = ["METADATA_OPS", "bytes_of", "footprint", "moves_nothing"]
