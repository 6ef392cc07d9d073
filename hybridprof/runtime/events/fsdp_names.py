"""FSDP2's profiler ranges: which unit each works for, which are communication, of which kind,
and the exposed part of each.

Every range naming a unit (its pre- and post-forward, pre- and post-backward hooks, a prefetch
for it) is that unit's time: the walk moves it to the unit's row wherever it ran
(`attribution._open_served`), so none stays in the enclosing layer, a backward node's layer or
the outside row. `fsdp_unit` says the unit, and whether the range is backward work.

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
1 FSDP2 gathers nothing (no all-gather or copy-out range opens).

A range holds the collective's call and the wait for it, and the compute around them: the copy into
the gather's input buffer (`fsdp::all_gather_copy_in`), the copy-out's splits, the gradients'
copies. Its exposed part (`settle_exposed`, once a thread is walked) is its wall time less its
direct children that are compute (`is_collective_call` tells them apart): the time the rank's
thread spent issuing and waiting for the collective, with no compute of its own beside it. A wait
with no op of its own (a work's `wait()` on gloo) is the range's self time, so exposed, and so is
FSDP2's own Python in the range (the two cannot be told apart). On CPU (gloo) a collective runs
while its caller waits, so nearly all of a range is exposed. On CUDA this is still the CPU thread's
view: a collective the device overlaps with compute kernels on another stream shows as exposed only
as long as the thread waits for it.
Torch-free.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from typing import Literal

from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.measures.iteration import IterationMeasure

CommKind = Literal["all_gather", "regather", "copy_out", "reduce_scatter"]
COMM_KINDS: tuple[CommKind, ...] = ("all_gather", "regather", "copy_out", "reduce_scatter")

_PREFIX = "FSDP::"
_RANGES: dict[str, CommKind] = {
    "all_gather": "all_gather",
    "all_gather_copy_out": "copy_out",
    "post_backward_reduce": "reduce_scatter",
}


# Ops inside an FSDP2 range that are the collective itself (its call, its backend's events).
_COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::", "record_param_comms", "gloo:", "nccl:")


def is_collective_call(name: str) -> bool:
    """An op that is a collective's call or its backend's, not compute around it."""
    return name.startswith(_COLLECTIVE_PREFIXES)


def fsdp_comm(name: str) -> tuple[CommKind, str] | None:
    """(kind, unit path) of an FSDP2 communication range; None for every other name. A gather's
    kind here is "all_gather": the walk tells a backward re-gather by where it runs."""
    found = _what_and_unit(name)
    if found is None:
        return None
    kind = _RANGES.get(found[0])
    return None if kind is None else (kind, found[1])


def fsdp_unit(name: str) -> tuple[str, bool] | None:
    """The unit (its path, "" for the root) an FSDP2 range works for: the unit it names, or the
    one a prefetch gathers for; and whether it is backward work (a pre- or post-backward hook, a
    backward prefetch, the root's post-backward callback, which runs after the last backward node
    and in none). None for every other name (an op, or one of FSDP2's few ranges that name no
    unit: `FSDP::cast_forward_inputs`, `FSDP::inputs_to_device`)."""
    found = _what_and_unit(name)
    if found is None:
        return None
    what, path = found
    return path, what in _BACKWARD_RANGES


# FSDP2's ranges that name their unit (`FSDPParamGroup._with_fqn`: no suffix for the root), and
# the root's own two.
_UNIT_RANGES = frozenset(
    (
        "all_gather",
        "all_gather_copy_out",
        "pre_forward",
        "post_forward",
        "pre_backward",
        "post_backward_accumulate",
        "post_backward_reshard",
        "post_backward_rs_wait",
        "post_backward_reduce",
    )
)
_ROOT_RANGES = frozenset(("root_pre_forward", "root_post_backward_callback"))
_PREFETCH_FOR = ("forward_prefetch", "backward_prefetch")
_BACKWARD_RANGES = frozenset(
    (
        "pre_backward",
        "post_backward_accumulate",
        "post_backward_reshard",
        "post_backward_rs_wait",
        "post_backward_reduce",
        "backward_prefetch",
        "root_post_backward_callback",
    )
)
_GROUP_SUFFIX = re.compile(r" \[pg=\d+\]$")  # a unit with several parameter groups


def _what_and_unit(name: str) -> tuple[str, str] | None:
    """(what, unit path) of an FSDP2 range that names its unit: `FSDP::<what> (<path>)`,
    `FSDP::<what>` (the root; `FSDP::post_backward_rs_wait ()` too), `FSDP::<pass>_prefetch for
    <path>`."""
    if not name.startswith(_PREFIX):
        return None
    what, _, rest = _GROUP_SUFFIX.sub("", name[len(_PREFIX) :]).partition(" ")
    if what in _PREFETCH_FOR:
        return (what, rest[4:]) if rest.startswith("for ") else None
    if what in _ROOT_RANGES:
        return None if rest else (what, "")
    if what not in _UNIT_RANGES:
        return None
    if not rest:
        return what, ""  # the root unit
    if rest.startswith("(") and rest.endswith(")"):
        return what, rest[1:-1]
    return None


def settle_exposed(
    notes: Sequence[tuple[Event, str, str]], events: Sequence[Event], measure: IterationMeasure
) -> None:
    """Each noted range's exposed time to its (unit, kind); `events`: the range's thread's, in
    start order (as the walk leaves them)."""
    starts = [event.start_ns for event in events]
    for event, kind, path in notes:
        first = bisect_left(starts, event.start_ns)
        # the range itself among the events starting in its nanosecond (a parent comes first)
        while first < len(events) and events[first] is not event:
            first += 1
        compute_ns = _compute_children_ns(events, first + 1, event.end_ns)
        measure.add_exposed(path, kind, (event.end_ns - event.start_ns - compute_ns) / 1000)


def _compute_children_ns(events: Sequence[Event], index: int, end_ns: int) -> int:
    """The wall time of the direct children (from `index` on, ending by `end_ns`) that are not
    the collective's own calls."""
    compute = 0
    child_end = -1  # the end of the direct child last seen: events before it are nested in it
    while index < len(events) and events[index].start_ns < end_ns:
        child = events[index]
        index += 1
        if child.kind != "cpu" or child.start_ns < child_end:
            continue
        child_end = child.end_ns
        if not is_collective_call(child.name):
            compute += min(child.end_ns, end_ns) - child.start_ns
    return compute


__all__ = [
    "COMM_KINDS",
    "CommKind",
    "fsdp_comm",
    "fsdp_unit",
    "is_collective_call",
    "settle_exposed",
]
