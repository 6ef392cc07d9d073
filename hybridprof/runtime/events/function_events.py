"""Fold one profiled call's FunctionEvent tree into per-path measures, never double counting.

torchprof summed the inclusive time of every event, so a conv's `aten::conv2d` ->
`aten::convolution` -> `aten::_convolution` chain counted the same work three times. Here a path's
total is the sum of the inclusive times of its TOP-LEVEL ops only; the per-op rows keep each op's
self and total time, so the self column of the ops sums to the path's total.

A selected child called inside a profiled parent shows up as a range event named by
`range_label(path)`. Its ops belong to the child: the parent's total includes the child's total,
the parent's self excludes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, PathMeasure

RANGE_PREFIX = "hybridprof.per_call:"


def range_label(path: str) -> str:
    return f"{RANGE_PREFIX}{path}"


@dataclass(frozen=True, slots=True)
class EventFields:
    """The FunctionEvent attribute names to read, per `Compat.event_fields` ("device" or "cuda")."""

    self_device_time: str
    device_time: str
    self_device_mem: str
    device_mem: str

    @classmethod
    def for_compat(cls, event_fields: str) -> EventFields:
        kind = "cuda" if event_fields == "cuda" else "device"
        return cls(
            f"self_{kind}_time_total",
            f"{kind}_time_total",
            f"self_{kind}_memory_usage",
            f"{kind}_memory_usage",
        )


@dataclass(slots=True)
class _Totals:
    cpu: float = 0.0
    device: float = 0.0
    cpu_mem: int = 0
    device_mem: int = 0

    def add(self, other: _Totals) -> None:
        self.cpu += other.cpu
        self.device += other.device
        self.cpu_mem += other.cpu_mem
        self.device_mem += other.device_mem


class CallFolder:
    """Folds calls into an IterationMeasure; `device` says whether device fields are read."""

    def __init__(self, measure: IterationMeasure, fields: EventFields, device: bool) -> None:
        self.measure = measure
        self.fields = fields
        self.device = device
        self._open: dict[str, int] = {}  # per path, its calls being folded (> 1: it recursed)

    def fold_call(self, path: str, top_events: Iterable[Any]) -> _Totals:
        """Add one call of `path` whose top-level events are `top_events`; returns its totals."""
        own, children = _Totals(), _Totals()
        ops = self.measure.path(path).ops
        depth = self._open.get(path, 0)
        self._open[path] = depth + 1
        try:
            for event in top_events:
                if _is_range(event):
                    child = self.fold_call(_range_path(event), event.cpu_children)
                    own.add(child)
                    children.add(child)
                else:
                    own.add(self._inclusive(event))
                    self._walk_ops(event, ops, children)
        finally:
            self._open[path] = depth
        self._record(self.measure.path(path), own, children, outermost=depth == 0)
        return own

    def _walk_ops(self, event: Any, ops: dict[str, OpMeasure], children: _Totals) -> None:
        """Count `event` and its descendants as ops of the path; ranges found inside are
        children."""
        self._add_op(ops, event)
        for child in event.cpu_children:
            if _is_range(child):  # a module called from inside an op (rare): the op includes it
                children.add(self.fold_call(_range_path(child), child.cpu_children))
            else:
                self._walk_ops(child, ops, children)

    def _inclusive(self, event: Any) -> _Totals:
        return _Totals(
            cpu=float(event.cpu_time_total),
            device=float(getattr(event, self.fields.device_time)) if self.device else 0.0,
            cpu_mem=int(event.cpu_memory_usage),
            device_mem=int(getattr(event, self.fields.device_mem)) if self.device else 0,
        )

    def _add_op(self, ops: dict[str, OpMeasure], event: Any) -> None:
        op = ops.get(event.name)
        if op is None:
            op = ops[event.name] = OpMeasure(event.name)
        op.calls += 1
        op.self_cpu_us += float(event.self_cpu_time_total)
        op.total_cpu_us += float(event.cpu_time_total)
        op.self_cpu_mem += int(event.self_cpu_memory_usage)
        op.cpu_mem += int(event.cpu_memory_usage)
        if self.device:
            op.self_device_us += float(getattr(event, self.fields.self_device_time))
            op.total_device_us += float(getattr(event, self.fields.device_time))
            op.self_device_mem += int(getattr(event, self.fields.self_device_mem))
            op.device_mem += int(getattr(event, self.fields.device_mem))

    @staticmethod
    def _record(target: PathMeasure, own: _Totals, children: _Totals, outermost: bool) -> None:
        target.calls += 1
        if outermost:  # a recursive call's totals are already in its caller's
            target.total_cpu_us += own.cpu
            target.total_device_us += own.device
            target.cpu_mem += own.cpu_mem
            target.device_mem += own.device_mem
        target.self_cpu_us += own.cpu - children.cpu
        target.self_device_us += own.device - children.device
        target.self_cpu_mem += own.cpu_mem - children.cpu_mem
        target.self_device_mem += own.device_mem - children.device_mem


def _is_range(event: Any) -> bool:
    return str(event.name).startswith(RANGE_PREFIX)


def _range_path(event: Any) -> str:
    return str(event.name)[len(RANGE_PREFIX) :]


def top_level(events: Iterable[Any]) -> list[Any]:
    return [e for e in events if e.cpu_parent is None]


def descendants(event: Any) -> list[Any]:
    """All events under `event`, depth first (a nested call's own event list for raw())."""
    found: list[Any] = []
    stack = list(reversed(event.cpu_children))
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(reversed(current.cpu_children))
    return found


def ranges_by_path(events: Iterable[Any], paths: Mapping[str, str]) -> dict[str, list[Any]]:
    """Range events of nested selected calls, by path (`paths`: label -> path)."""
    found: dict[str, list[Any]] = {}
    for event in events:
        path = paths.get(event.name)
        if path is not None:
            found.setdefault(path, []).append(event)
    return found


__all__ = [
    "RANGE_PREFIX",
    "CallFolder",
    "EventFields",
    "descendants",
    "range_label",
    "ranges_by_path",
    "top_level",
]
