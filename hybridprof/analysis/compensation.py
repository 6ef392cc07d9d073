"""The profiler's own cost taken out of a session's figures: the compensated session every table
is built from (`layer_table`), with the raw session kept beside it.

A session with a calibration (`datamodel.Calibration`, since schema 12) knows what each recorded
event and each layer call cost the profiled thread. Each figure loses the cost of what was
recorded inside it, as TAU compensates (method and limits: docs/trust.md):

- a layer's forward self time: its forward events (nested ones each count) x the cost per event,
  its calls x the part of a range inside the layer's own range, and its profiled children's calls
  x the part around a range (the wrapper runs in the caller);
- a call's bare dispatch (`Calibration.call_us`: `nn.Module.__call__` before `forward`) is no
  profiler cost but runs in the caller's frame before the layer's range opens, so it is moved:
  each layer's forward self time gains its calls x it, its nearest profiled ancestor's loses as
  much (an outermost layer's dispatch ran in no range, like its wrapper: it is in no figure and
  none is moved). A layer then reads what calling it costs the model, as it does timed alone,
  and a container of many small layers no longer holds their dispatch as its own time. Moved,
  not taken out: the totals and the headline stay as they were;
- its backward self time: its backward events x the cost per event (backward has no ranges);
- the time in no layer (its ops' self times): its events x the cost per event; the wrapper around
  an outermost layer's range runs in no range and no op, so it is in no figure;
- a total: the costs of its subtree summed (its own part around its range is its caller's);
- each iteration's profiled time: every cost summed.

Where hybridprof drove the run it also times the step bare (`Calibration.bare_step_us`), stated
beside the compensated headline. It does not scale the costs: scaled so that their sum matched
(profiled - bare), a few bare steps timed low or high by chance moved every row (a layer doing
10x the work of its base read faster than it; docs/trust.md).

Nothing goes below zero: a figure the costs would take under zero is 0, and its row is flagged
(`clamped`). Device times are measured on the device and stay as they are; the ops' own figures
stay raw (they say what the profiler recorded).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hybridprof.analysis.tree import parent_of
from hybridprof.datamodel import (
    Calibration,
    IterationSeries,
    ModuleRecord,
    OpStat,
    ProfileSession,
    Series,
    Stat,
)


@dataclass(frozen=True, slots=True)
class RecordCost:
    """What the profiler added to one record per iteration, in us."""

    forward_self: float
    forward_total: float  # its subtree's forward costs (its own wrapper is its caller's)
    backward_self: float
    backward_total: float


@dataclass(frozen=True, slots=True)
class Compensated:
    """The session with the profiler's cost out, the raw session, and what was clamped.

    clamped: the paths (and the outside row's label "outside") whose figure the costs would have
    taken below zero; cost_us: what came off each iteration in all; scale: the factor the
    calibration's costs were taken out with."""

    session: ProfileSession
    raw: ProfileSession
    clamped: frozenset[str]
    cost_us: float


OUTSIDE = "outside"  # the outside row's entry in `Compensated.clamped`


def compensated(session: ProfileSession) -> Compensated | None:
    """`session` with the profiler's calibrated cost out of every figure; None without a
    calibration (an older file, an uncalibrated strategy: the raw figures are all there is).
    The compensated session carries the calibration it used."""
    calibration = session.calibration
    if calibration is None:
        return None
    costs, outside_cost = record_costs(session, calibration)
    clamped: set[str] = set()
    records = []
    for record in session.records:
        fixed, was_clamped = _record_less(record, costs[record.path])
        records.append(fixed)
        if was_clamped:
            clamped.add(record.path)
    outside = session.outside_cpu_us
    if outside is not None:
        if outside.median < outside_cost:
            clamped.add(OUTSIDE)
        outside = _stat_less(outside, outside_cost)
    total = _total(costs, outside_cost)
    fixed_session = replace(
        session,
        calibration=calibration,
        records=tuple(records),
        outside_cpu_us=outside,
        iteration_cpu_us=tuple(max(0.0, t - total) for t in session.iteration_cpu_us),
    )
    return Compensated(fixed_session, session, frozenset(clamped), total)


def _total(costs: dict[str, RecordCost], outside_cost: float) -> float:
    return outside_cost + sum(c.forward_self + c.backward_self for c in costs.values())


def record_costs(
    session: ProfileSession, calibration: Calibration
) -> tuple[dict[str, RecordCost], float]:
    """Per record, its costs (see the module docstring); and the outside time's."""
    iterations = max(session.iterations, 1)
    profiled = {r.path for r in session.records}
    forward: dict[str, float] = {}
    backward: dict[str, float] = {}
    outside = calibration.event_us * _events(session.outside_ops)
    for record in session.records:
        calls = record.calls / iterations
        forward_events, backward_events = _forward_backward_events(record.ops)
        forward[record.path] = (
            forward.get(record.path, 0.0)
            + forward_events * calibration.event_us
            + calls * calibration.range_inner_us
        )
        backward[record.path] = backward_events * calibration.event_us
        caller = _profiled_ancestor(record.path, profiled)
        if caller is not None:  # an outermost layer's wrapper runs in no range: in no figure
            forward[caller] = forward.get(caller, 0.0) + calls * calibration.range_outer_us
            # its dispatch ran in the caller's range: moved into the layer
            forward[caller] += calls * calibration.call_us
            forward[record.path] -= calls * calibration.call_us
    forward_total = _subtree(forward, profiled)
    backward_total = _subtree(backward, profiled)
    costs = {
        path: RecordCost(forward[path], forward_total[path], backward[path], backward_total[path])
        for path in profiled
    }
    return costs, outside


def _events(ops: tuple[OpStat, ...]) -> float:
    return float(sum(op.calls for op in ops))


def _forward_backward_events(ops: tuple[OpStat, ...]) -> tuple[float, float]:
    forward = sum(op.calls for op in ops if not op.backward)
    backward = sum(op.calls for op in ops if op.backward)
    return float(forward), float(backward)


def _profiled_ancestor(path: str, profiled: set[str]) -> str | None:
    """The nearest profiled ancestor of `path`: the range its call runs in (None: no layer)."""
    node = parent_of(path)
    while node is not None and node not in profiled:
        node = parent_of(node)
    return node


def _subtree(own: dict[str, float], profiled: set[str]) -> dict[str, float]:
    """Per profiled path, `own` summed over it and its profiled descendants."""
    sums = dict(own)
    for path in sorted(profiled, key=_depth, reverse=True):  # deepest first
        caller = _profiled_ancestor(path, profiled)
        if caller is not None:
            sums[caller] = sums.get(caller, 0.0) + sums.get(path, 0.0)
    return sums


def _depth(path: str) -> int:
    return 0 if path == "" else path.count(".") + 1


def _record_less(record: ModuleRecord, cost: RecordCost) -> tuple[ModuleRecord, bool]:
    """The record with its costs out; and whether a self figure hit zero."""
    clamped = record.self_cpu_us.median < cost.forward_self
    backward_self = record.backward_self_cpu_us
    if backward_self is not None and backward_self.median < cost.backward_self:
        clamped = True
    series = record.per_iteration
    fixed = replace(
        record,
        self_cpu_us=_stat_less(record.self_cpu_us, cost.forward_self),
        total_cpu_us=_stat_less(record.total_cpu_us, cost.forward_total),
        backward_self_cpu_us=_optional_less(backward_self, cost.backward_self),
        backward_total_cpu_us=_optional_less(record.backward_total_cpu_us, cost.backward_total),
        per_iteration=_series_less(series, cost) if series is not None else None,
    )
    return fixed, clamped


def _stat_less(stat: Stat, cost: float) -> Stat:
    """Each figure less `cost`, none below zero (a shift keeps the median the median)."""
    return Stat(max(0.0, stat.median - cost), max(0.0, stat.min - cost), max(0.0, stat.max - cost))


def _optional_less(stat: Stat | None, cost: float) -> Stat | None:
    return None if stat is None else _stat_less(stat, cost)


def _series_less(series: IterationSeries, cost: RecordCost) -> IterationSeries:
    def less(values: Series | None, amount: float) -> Series | None:
        if values is None:
            return None
        return Series.of(max(0.0, v - amount) for v in values.values)

    return replace(
        series,
        self_cpu_us=Series.of(max(0.0, v - cost.forward_self) for v in series.self_cpu_us.values),
        total_cpu_us=less(series.total_cpu_us, cost.forward_total),
        backward_self_cpu_us=less(series.backward_self_cpu_us, cost.backward_self),
        backward_total_cpu_us=less(series.backward_total_cpu_us, cost.backward_total),
    )


__all__ = [
    "OUTSIDE",
    "Compensated",
    "RecordCost",
    "compensated",
    "record_costs",
]
