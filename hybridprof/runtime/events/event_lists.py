"""torchprof's `raw()` values: per layer call, a torch `EventList` of `FunctionEvent`s.

torchprof ran a profiler around every layer call and kept its `function_events`; code written for
it reads `cpu_time_total`, `self_cpu_time_total`, `cpu_memory_usage`, `key`, `count`,
`cpu_children`/`cpu_parent`, `table()`, `key_averages()` and `total_average()` from them. The
session strategy never builds torch's events (that is part of what makes it cheap), so they are
built here, from the attribution's frames, the first time `Profile.raw()` asks.

Real torch objects (`FunctionEvent`, `EventList`), each event a copy of the attributes of one made
with torch's public constructor (several times cheaper than the constructor, and far cheaper than
torch's own `function_events`, which parses every kineto field; figures: benchmarks/README.md,
"Measured in passing"), linked into the tree torch would build: an op's `cpu_parent` is the
innermost op enclosing it, and an op nested as the only child of an op of the same name was already
merged into its parent by the attribution walk (`MERGED`), as torch's `EventList._remove_dup_nodes`
does. A call's list holds every op that ran inside it, the ops of selected layers it called included
(a profiler around the call sees them too), in start order; the layer ranges themselves are not
events. Each list is marked as a built tree, so `key_averages()` works without rebuilding it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from torch.autograd.profiler_util import EventList, FunctionEvent, Interval, Kernel

from hybridprof.runtime.events.frames import (
    CHILD_DMEM,
    CHILD_MEM,
    DMEM,
    EVENT,
    KIND,
    MEM,
    OP,
    PARENT,
    RANGE,
    RAW,
    Frame,
)


class RawEvent(NamedTuple):
    """One timed call of the timer strategy (it has no ops); times in us."""

    name: str
    start_us: float
    end_us: float
    self_us: float


class ListOptions(NamedTuple):
    """How torch would have labelled the lists: its device name and whether memory was asked for."""

    use_device: str | None = None
    profile_memory: bool = False


def from_frames(
    calls: Mapping[str, list[Frame]],
    kernels: Mapping[int, list[tuple[str, int, float]]],
    options: ListOptions,
) -> dict[str, list[EventList]]:
    """Per path, one EventList per call, from the layer frames the attribution kept.

    Each op's event is made once and kept in its frame's RAW slot (unused by op frames), so a
    second call reuses the events instead of linking them into the tree twice.
    """
    ops_of = _ops_per_call(calls)
    made = _make_events(ops_of.values(), options)
    for frame in made:
        event = frame[RAW]
        parent = _enclosing_op(frame)
        if parent is not None and parent[RAW] is not None:
            event.cpu_parent = parent[RAW]
            parent[RAW].cpu_children.append(event)
        if kernels:
            for name, device, duration in kernels.get(id(frame), ()):
                event.kernels = [*event.kernels, Kernel(name, device, duration)]
    if kernels:
        as_legacy_device_time([frame[RAW] for frame in made])
    return {
        path: [_event_list([f[RAW] for f in ops_of[id(call)]], options) for call in frames]
        for path, frames in calls.items()
    }


def as_legacy_device_time(events: Iterable[FunctionEvent]) -> None:
    """Give each CPU event one kernel holding its inclusive device time, marked legacy.

    torch's own lists from Kineto carry each kernel twice: under its launching CPU op and as a
    device-type event of its own, and `EventList.table()` sums self device time over the latter
    (an assertion fails when a list has kernels on CPU events only). torchprof's lists (torch 1.x)
    had the legacy shape instead: one CUDA-event timing per CPU op, inclusive of its children.
    So each op keeps its own kernels and gets one more entry for its children's kernels
    (`NESTED_KERNELS`): a call's list stays CPU ops only (torchprof's op-name checks), and torch's
    properties come out right: device_time_total is the inclusive time, self_device_time_total
    what the op's own kernels took, and table()/key_averages() sum the self times.
    """
    inclusive: dict[int, float] = {}

    def total(event: FunctionEvent) -> float:
        key = id(event)
        if key not in inclusive:
            if event.is_legacy:
                inclusive[key] = sum(k.duration for k in event.kernels)
            else:
                own = sum(k.duration for k in event.kernels)
                inclusive[key] = own + sum(total(child) for child in event.cpu_children)
        return inclusive[key]

    for event in events:
        total(event)
    for event in events:
        if event.is_legacy:
            continue
        nested = inclusive[id(event)] - sum(k.duration for k in event.kernels)
        if nested > 0:  # the children's kernels, so the kernels add up to the inclusive time
            device = event.kernels[0].device if event.kernels else 0
            event.kernels = [*event.kernels, Kernel(NESTED_KERNELS, device, nested)]
        event.is_legacy = True


NESTED_KERNELS = "(kernels of nested ops)"


def _make_events(calls: Iterable[list[Frame]], options: ListOptions) -> list[Frame]:
    """A FunctionEvent in the RAW slot of every op frame that has none yet; returns those frames.

    Built by copying the attribute dict of one event made with torch's public constructor (so
    every attribute this torch version has is there) and setting the fields that differ: several
    times cheaper than `__init__`, which matters at tens of thousands of events.
    Times are us from the first op, as torch counts them from the start of its trace.
    """
    frames = list({id(f): f for ops in calls for f in ops if f[RAW] is None}.values())
    if not frames:
        return []
    base = min(f[EVENT].start_ns for f in frames)
    fields = vars(_new_event(0, "", 0, 0.0, 0.0))
    fields["use_device"] = options.use_device
    new, copy = object.__new__, fields.copy
    for index, frame in enumerate(frames, 1):
        raw = frame[EVENT]
        event = new(FunctionEvent)
        values = copy()
        values["id"] = index
        values["name"] = values["trace_name"] = raw.name
        values["thread"] = values["device_resource_id"] = raw.thread
        values["time_range"] = Interval((raw.start_ns - base) / 1000, (raw.end_ns - base) / 1000)
        values["cpu_children"] = []
        values["sequence_nr"] = raw.seq
        values["cpu_memory_usage"] = frame[MEM] + frame[CHILD_MEM]
        values["device_memory_usage"] = frame[DMEM] + frame[CHILD_DMEM]
        event.__dict__ = values
        frame[RAW] = event
    return frames


def from_timer(calls: Mapping[str, list[list[RawEvent]]]) -> dict[str, list[EventList]]:
    """The timer strategy's calls as events named by their path, nested calls as children."""
    ordered = sorted(
        (e for per_path in calls.values() for call in per_path for e in call),
        key=lambda e: (e.start_us, -e.end_us),
    )
    events = {id(e): _new_event(i, e.name, 0, e.start_us, e.end_us) for i, e in enumerate(ordered)}
    inside: dict[int, list[FunctionEvent]] = {}
    stack: list[RawEvent] = []
    for raw in ordered:
        while stack and raw.start_us >= stack[-1].end_us:
            stack.pop()
        if stack:
            parent = events[id(stack[-1])]
            events[id(raw)].cpu_parent = parent
            parent.cpu_children.append(events[id(raw)])
        for outer in stack:
            inside.setdefault(id(outer), []).append(events[id(raw)])
        stack.append(raw)
    options = ListOptions()
    return {
        path: [
            _event_list([events[id(e)] for e in call] + _inside(call, inside), options)
            for call in per_path
        ]
        for path, per_path in calls.items()
    }


def built(events: Iterable[Any], options: ListOptions) -> EventList:
    """An EventList of events already linked into a tree (torch would otherwise refuse
    `key_averages()` on it, or link the shared events a second time)."""
    return _event_list(events, options)


def _inside(call: list[RawEvent], inside: Mapping[int, list[FunctionEvent]]) -> list[FunctionEvent]:
    return [nested for e in call for nested in inside.get(id(e), ())]


def _ops_per_call(calls: Mapping[str, list[Frame]]) -> dict[int, list[Frame]]:
    """Per layer call (by frame id): its own ops and those of the selected calls inside it, in
    start order. Calls are taken in the order they ended, so a nested call comes first."""
    ops_of: dict[int, list[Frame]] = {}
    for frame in sorted((f for frames in calls.values() for f in frames), key=_end):
        ops = [op for op in frame[RAW] if op[KIND] == OP]  # in start order; not the MERGED ones
        nested = ops_of.pop(id(frame), None)
        if nested:
            ops = sorted(ops + nested, key=_order)
        ops_of[id(frame)] = ops
        outer = _enclosing_range(frame)
        if outer is not None:
            ops_of.setdefault(id(outer), []).extend(ops)
    return ops_of


def _enclosing_range(frame: Frame) -> Frame | None:
    parent: Frame | None = frame[PARENT]
    return None if parent is None else parent[RANGE]


def _enclosing_op(frame: Frame) -> Frame | None:
    """The innermost op around `frame`: layer ranges are not events, and a merged op's place is
    taken by the parent it was merged into."""
    parent: Frame | None = frame[PARENT]
    while parent is not None and parent[KIND] != OP:
        parent = parent[PARENT]
    return parent


def _new_event(index: int, name: str, thread: int, start_us: float, end_us: float) -> FunctionEvent:
    """torch's public constructor. Shapes and stack were not recorded: torch leaves them empty
    lists then (`key_averages()` slices the stack); one shared empty list serves every event,
    and kernels too until an event gets some (a new list then)."""
    event = FunctionEvent(
        index, name, thread, start_us, end_us, input_shapes=_NOTHING, stack=_NOTHING
    )
    event.kernels = _NOTHING
    return event


_NOTHING: list[Any] = []  # never appended to: events get a new list where they have items


def _event_list(events: Iterable[Any], options: ListOptions) -> EventList:
    result = EventList(events, use_device=options.use_device, profile_memory=options.profile_memory)
    result._tree_built = True
    return result


def _order(frame: Frame) -> tuple[int, int]:
    event = frame[EVENT]
    return event.start_ns, -event.end_ns


def _end(frame: Frame) -> tuple[int, int]:
    event = frame[EVENT]
    return event.end_ns, -event.start_ns


__all__ = ["ListOptions", "RawEvent", "built", "from_frames", "from_timer"]
