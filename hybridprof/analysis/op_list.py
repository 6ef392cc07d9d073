"""Which of a layer's ops a table lists: the heaviest few, and the rest summed (torch-free).

A training step's layer runs 20 or more ops (its backward's autograd nodes, views, AccumulateGrad),
so a 2-block transformer's table with every op ran to 440 lines. A table lists a layer's
`max_events` heaviest ops (own time on the CPU and the device) and, for the rest, one summed op per
pass (forward, then backward: their times sit in different columns), so each self column still
adds up to the layer's; a pass with a single op left out lists it instead (the same one line).
`max_events=None` lists every op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hybridprof.datamodel import OpStat
from hybridprof.errors import BadValueError

MAX_EVENTS = 8  # ops a layer lists by default (`display(show_events=True)`, `report --show-events`)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Ops of one pass a table leaves out: how many, and their self figures summed (`summed`'s
    inclusive figures are 0: ops nest, so their totals do not add up)."""

    ops: int
    summed: OpStat


@dataclass(frozen=True, slots=True)
class OpList:
    listed: tuple[OpStat, ...]  # heaviest first
    left_out: tuple[LeftOut, ...]  # forward, then backward; empty when every op is listed


def op_list(ops: Sequence[OpStat], max_events: int | None = MAX_EVENTS) -> OpList:
    """The ops a table lists of `ops` (at most `max_events`; None: all) and the rest summed."""
    check_max_events(max_events)
    ordered = sorted(ops, key=_heaviest_first)
    if max_events is None or len(ordered) <= max_events:
        return OpList(tuple(ordered), ())
    rest = ordered[max_events:]
    passes = ([o for o in rest if not o.backward], [o for o in rest if o.backward])
    # A pass with one op left out lists that op: its row costs the line a summary would.
    alone = [group[0] for group in passes if len(group) == 1]
    listed = sorted([*ordered[:max_events], *alone], key=_heaviest_first)
    return OpList(tuple(listed), tuple(_left_out(group) for group in passes if len(group) > 1))


def check_max_events(max_events: int | None) -> None:
    if max_events is not None and (isinstance(max_events, bool) or max_events < 0):
        raise BadValueError(f"max_events must be 0 or more (None: every op), got {max_events!r}")


def _heaviest_first(op: OpStat) -> tuple[float, str]:
    return (-(op.self_cpu_us + op.self_device_us), op.name)


def _left_out(ops: list[OpStat]) -> LeftOut:
    summed = OpStat(
        name=f"{len(ops)} more ops",
        calls=sum(o.calls for o in ops),
        self_cpu_us=sum(o.self_cpu_us for o in ops),
        total_cpu_us=0.0,
        self_device_us=sum(o.self_device_us for o in ops),
        self_cpu_mem=sum(o.self_cpu_mem for o in ops),
        self_device_mem=sum(o.self_device_mem for o in ops),
        backward=ops[0].backward,
    )
    return LeftOut(len(ops), summed)


__all__ = ["MAX_EVENTS", "LeftOut", "OpList", "check_max_events", "op_list"]
