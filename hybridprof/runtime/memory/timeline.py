"""The memory timeline of one step: live bytes against time, downsampled, and the layer ranges
beneath it.

A step has thousands to millions of allocation events; the chart needs a few hundred points.
Each time bucket keeps its highest value and its last one (where the next bucket starts from),
so the envelope is exact and the step's peak is always a point. Lanes: forward calls and each
forward call's backward (its nodes' span) to depth `LANE_DEPTH` among the profiled layers, and
the optimizer's ranges; at most `MAX_LANES`, the longest kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridprof.datamodel.measures import Series
from hybridprof.datamodel.memory import ByteSeries, MemoryTimeline, TimelineLane
from hybridprof.runtime.memory.contexts import StepContexts

Array = np.ndarray[Any, Any]
MAX_POINTS = 600
LANE_DEPTH = 2
MAX_LANES = 400


def downsample(time: Array, values: list[Array], points: int = MAX_POINTS) -> Array:
    """Indices of the events to keep: per time bucket the highest of `values[0]` and the last
    (all of them when there are few). The first series decides; the others follow."""
    count = len(time)
    if count <= points:
        return np.arange(count)
    edges = np.linspace(time[0], time[-1], points // 2 + 1)[1:-1]
    cuts = np.searchsorted(time, edges, side="right")
    bounds = np.unique(np.r_[0, cuts, count])
    starts, ends = bounds[:-1], bounds[1:]
    keep = starts < ends
    starts, ends = starts[keep], ends[keep]
    live = values[0]
    highest = [
        s + int(np.argmax(live[s:e])) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    return np.unique(np.r_[np.array(highest, dtype=np.int64), ends - 1])


def timeline(
    time_ns: Array,
    live: Array,
    reserved: Array | None,
    contexts: StepContexts,
    mark_ns: int,
    end_ns: int,
    start_bytes: int,
) -> MemoryTimeline:
    """The step's timeline (live bytes absolute: the start plus the running sum)."""
    keep = downsample(time_ns, [live])
    times = (time_ns[keep] - mark_ns) / 1000
    values = live[keep]
    kept_reserved = reserved[keep] if reserved is not None else None
    # the curve starts at the step's start, from the bytes live then
    times = np.r_[0.0, times]
    values = np.r_[start_bytes, values]
    if kept_reserved is not None:
        kept_reserved = np.r_[kept_reserved[0] if len(kept_reserved) else 0, kept_reserved]
    return MemoryTimeline(
        time_us=Series.of(times.tolist()),
        live_bytes=ByteSeries(int(v) for v in values.tolist()),
        end_us=round(max(end_ns - mark_ns, 0) / 1000, 1),
        events=len(time_ns),
        reserved_bytes=(
            ByteSeries(int(v) for v in kept_reserved.tolist())
            if kept_reserved is not None
            else None
        ),
        lanes=lanes(contexts, mark_ns),
    )


def lanes(contexts: StepContexts, mark_ns: int) -> tuple[TimelineLane, ...]:
    found: list[TimelineLane] = []

    def us(ns: int) -> float:
        return round((ns - mark_ns) / 1000, 1)

    for window in contexts.forward_calls:
        chain = contexts.contexts[window.context].chain
        if len(chain) - 1 <= LANE_DEPTH:
            path = chain[-1][0]
            found.append(
                TimelineLane(path, "forward", len(chain) - 1, us(window.start), us(window.end))
            )
    spans: dict[tuple[str, int], list[int]] = {}
    depth: dict[tuple[str, int], int] = {}
    for window in contexts.nodes:
        for level, link in enumerate(contexts.contexts[window.context].chain[: LANE_DEPTH + 1]):
            span = spans.setdefault(link, [window.start, window.end])
            span[0], span[1] = min(span[0], window.start), max(span[1], window.end)
            depth[link] = level
    for (path, _call), (start, end) in spans.items():
        found.append(TimelineLane(path, "backward", depth[(path, _call)], us(start), us(end)))
    for window in contexts.optimizer:
        name = contexts.contexts[window.context].node
        found.append(TimelineLane(name, "optimizer", 0, us(window.start), us(window.end)))
    if len(found) > MAX_LANES:
        found = sorted(found, key=lambda lane: lane.start_us - lane.end_us)[:MAX_LANES]
    return tuple(sorted(found, key=lambda lane: (lane.start_us, lane.depth)))


__all__ = ["LANE_DEPTH", "MAX_LANES", "MAX_POINTS", "downsample", "lanes", "timeline"]
