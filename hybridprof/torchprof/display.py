"""torchprof's `display.traces_to_display`: the tree table from `raw()`'s traces and event lists.

Same signature, columns and tree drawing as torchprof 1.4.0 (MIT, (c) 2019 Alexander W. Wong),
for code that calls it on `prof.raw()`. Two things differ, on purpose:

- A layer's "CPU total" (and memory) is the sum over each call's TOP-LEVEL events, as
  `hybridprof.Profile` shows it. torchprof summed the inclusive time of every event, so a conv's
  `aten::conv2d` -> `aten::convolution` -> `aten::_convolution` chain counted three times.
- Times and sizes are formatted here (torch 2 removed `torch.autograd.profiler.format_time`,
  which made torchprof's own `display()` crash), and device columns read torch 2's `device_*`
  fields (the `cuda_*` names warn as deprecated).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from hybridprof.reporting.format import format_bytes, format_time_us

HEADING = (
    "Module",
    "Self CPU total",
    "CPU total",
    "Self CUDA total",
    "CUDA total",
    "Self CPU Mem",
    "CPU Mem",
    "Self CUDA Mem",
    "CUDA Mem",
    "Number of Calls",
)
TREE_CHARS = ("\u2502", "\u251c\u2500\u2500 ", "\u2514\u2500\u2500 ", " ")  # torchprof's "ascii-ex"


class Measure(NamedTuple):
    """One row's numbers (torchprof's Measure; None where the events lack the field)."""

    self_cpu_total: float
    cpu_total: float
    self_cuda_total: float | None
    cuda_total: float
    self_cpu_memory: int | None
    cpu_memory: int | None
    self_cuda_memory: int | None
    cuda_memory: int | None
    occurrences: int


def traces_to_display(
    traces: Iterable[Any],
    trace_events: Mapping[Any, Sequence[Sequence[Any]]],
    show_events: bool = False,
    paths: Sequence[Any] | None = None,
    use_cuda: bool = False,
    profile_memory: bool = False,
    dt: tuple[str, str, str, str] = TREE_CHARS,
) -> str:
    """Human-readable table of the traces and their events, torchprof's way."""
    tree: dict[str | None, Any] = {}
    for path, leaf, _module in traces:
        node = tree
        for name in path:
            node = node.setdefault(name, {})
        if (paths is None and leaf) or (paths is not None and path in paths):
            calls = trace_events.get(path, [])
            if show_events:
                events = [event for call in calls for event in call]
                for op_name, group in _group_by_name(events).items():
                    node[op_name] = {None: _measure(group, [group], len(group))}
            else:
                node[None] = _measure([e for call in calls for e in call], calls, len(calls))
    return _table(_tree_lines(_flatten(tree), dt), use_cuda, profile_memory)


def _group_by_name(events: Iterable[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for event in events:
        groups.setdefault(event.name, []).append(event)
    return groups


def _flatten(tree: dict[str | None, Any], depth: int = 0) -> list[tuple[int, str, Measure | None]]:
    flat: list[tuple[int, str, Measure | None]] = []
    for name, subtree in tree.items():
        if name is None:
            continue
        flat.append((depth, name, subtree.get(None)))
        flat.extend(_flatten(subtree, depth + 1))
    return flat


def _tree_lines(
    flat: list[tuple[int, str, Measure | None]], dt: tuple[str, str, str, str]
) -> list[tuple[str, Measure | None]]:
    """Each row's name behind torchprof's box drawing: a branch where a later row has the same
    depth and the next row is not shallower, else a corner; bars for deeper levels still open."""
    lines: list[tuple[str, Measure | None]] = []
    later: set[int] = set()  # depths of the rows after the current one
    for i in range(len(flat) - 1, -1, -1):
        depth, name, measure = flat[i]
        next_depth = flat[i + 1][0] if i + 1 < len(flat) else -1
        pre = ""
        if depth > 0:
            pre = dt[1] if depth in later and next_depth >= depth else dt[2]
            for level in range(depth - 1, 0, -1):
                pre = (dt[0] if level in later else dt[3]) + pre
        lines.append((pre + name, measure))
        later.add(depth)
    return lines[::-1]


def _measure(events: list[Any], calls: Sequence[Sequence[Any]], occurrences: int) -> Measure:
    top = [e for call in calls for e in _top_level(call)]
    return Measure(
        self_cpu_total=sum(e.self_cpu_time_total for e in events),
        cpu_total=sum(e.cpu_time_total for e in top),
        self_cuda_total=_sum(events, "self_device_time_total", "self_cuda_time_total"),
        cuda_total=_sum(top, "device_time_total", "cuda_time_total") or 0,
        self_cpu_memory=_sum(events, "self_cpu_memory_usage"),
        cpu_memory=_sum(top, "cpu_memory_usage"),
        self_cuda_memory=_sum(events, "self_device_memory_usage", "self_cuda_memory_usage"),
        cuda_memory=_sum(top, "device_memory_usage", "cuda_memory_usage"),
        occurrences=occurrences,
    )


def _top_level(call: Sequence[Any]) -> list[Any]:
    """The events of one call not nested in another event of the same call."""
    inside = {id(e) for e in call}
    return [
        e for e in call if getattr(e, "cpu_parent", None) is None or id(e.cpu_parent) not in inside
    ]


def _sum(events: list[Any], *names: str) -> Any:
    """The sum of the first field the events have (torch 2's name, then torch 1's); None if none."""
    for name in names:
        if any(hasattr(e, name) for e in events[:1]):
            return sum(getattr(e, name) for e in events)
    return None


def _formatted(measure: Measure | None) -> list[str]:
    if measure is None:
        return [""] * 9
    return [
        format_time_us(measure.self_cpu_total),
        format_time_us(measure.cpu_total),
        _maybe(format_time_us, measure.self_cuda_total),
        format_time_us(measure.cuda_total),
        _maybe(format_bytes, measure.self_cpu_memory),
        _maybe(format_bytes, measure.cpu_memory),
        _maybe(format_bytes, measure.self_cuda_memory),
        _maybe(format_bytes, measure.cuda_memory),
        str(measure.occurrences),
    ]


def _maybe(formatter: Callable[[Any], str], value: Any) -> str:
    return "" if value is None else formatter(value)


def _table(lines: list[tuple[str, Measure | None]], use_cuda: bool, profile_memory: bool) -> str:
    rows = [[name, *_formatted(measure)] for name, measure in lines]
    measures = [measure for _, measure in lines if measure is not None]
    keep = [0, 1, 2, 9]
    if profile_memory:
        keep += [i for i, f in ((5, "self_cpu_memory"), (6, "cpu_memory")) if _has(measures, f)]
    if use_cuda:
        keep += [3] if _has(measures, "self_cuda_total") else []
        keep.append(4)
        if profile_memory:
            keep += [
                i for i, f in ((7, "self_cuda_memory"), (8, "cuda_memory")) if _has(measures, f)
            ]
    keep.sort()
    widths = [max(len(row[i]) for row in [list(HEADING), *rows]) for i in range(len(HEADING))]
    out = " | ".join(f"{HEADING[i]:<{widths[i]}s}" for i in keep) + "\n"
    out += "-|-".join("-" * widths[i] for i in keep) + "\n"
    for row in rows:
        out += " | ".join(f"{row[i]:<{widths[i]}s}" for i in keep) + "\n"
    return out


def _has(measures: list[Measure], field: str) -> bool:
    return any(getattr(m, field) is not None for m in measures)


__all__ = ["Measure", "traces_to_display"]
