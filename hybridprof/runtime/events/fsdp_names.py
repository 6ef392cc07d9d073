"""FSDP2's profiler ranges: which are communication, of which kind, and for which unit.

`torch.distributed.fsdp.fully_shard` opens a `record_function` range around each thing it does
for a unit (a module it sharded), named `FSDP::<what> (<the unit's path>)` (the root unit's path
is "", and its names have no parentheses). Four of them are communication:

- `FSDP::all_gather (u)`: the all-gather of unit u's parameters. It runs in u's forward pre-hook,
  or in a prefetch (`FSDP::forward_prefetch for u` / `FSDP::backward_prefetch for u`) opened while
  another unit runs: the range still names u, the unit it gathers for, so the gather is u's;
- `FSDP::all_gather_copy_out (u)`: the copy of the gathered buffer into u's unsharded parameters;
- `FSDP::post_backward_reduce (u)`: the reduce-scatter of u's gradients (and, under HSDP, their
  all-reduce), in u's post-backward.

An all-gather inside a backward node (autograd ran it: the pre-backward hook, or a backward
prefetch) is the backward's re-gather of parameters freed after the forward. With a world size of
1 FSDP2 gathers nothing (no all-gather or copy-out range opens). Torch-free.
"""

from __future__ import annotations

from typing import Literal

CommKind = Literal["all_gather", "regather", "copy_out", "reduce_scatter"]
COMM_KINDS: tuple[CommKind, ...] = ("all_gather", "regather", "copy_out", "reduce_scatter")

_PREFIX = "FSDP::"
_RANGES: dict[str, CommKind] = {
    "all_gather": "all_gather",
    "all_gather_copy_out": "copy_out",
    "post_backward_reduce": "reduce_scatter",
}


def fsdp_comm(name: str) -> tuple[CommKind, str] | None:
    """(kind, unit path) of an FSDP2 communication range; None for every other name. A gather's
    kind here is "all_gather": the walk tells a backward re-gather by where it runs."""
    if not name.startswith(_PREFIX):
        return None
    what, _, rest = name[len(_PREFIX) :].partition(" ")
    kind = _RANGES.get(what)
    if kind is None:
        return None
    if not rest:
        return kind, ""  # the root unit
    if rest.startswith("(") and rest.endswith(")"):
        return kind, rest[1:-1]
    return None


__all__ = ["COMM_KINDS", "CommKind", "fsdp_comm"]
