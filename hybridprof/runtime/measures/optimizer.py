"""The optimizer's record of a session: its row of the measure table summarised over iterations.

An iteration without an optimizer step (a with-block whose steps stepped only every few
iterations) counts as 0 for it, as a layer not called in an iteration does.
"""

from __future__ import annotations

from hybridprof.datamodel import (
    OPTIMIZER_PARTS,
    OpStat,
    OptimizerPart,
    OptimizerRecord,
    Series,
    Stat,
)
from hybridprof.runtime.measures.iteration import OPTIMIZER_KEY, OptimizerMeasure
from hybridprof.runtime.measures.measure_table import MeasureTable


def optimizer_record(
    table: MeasureTable, ops: tuple[OpStat, ...], *, use_device: bool
) -> OptimizerRecord | None:
    """The `(optimizer)` record of `table`'s iterations (None when no optimizer ran); `ops` are
    its op medians, worked out with the layers' (`aggregate.py`)."""
    row = table.row_of(OPTIMIZER_KEY)
    if row is None:
        return None
    per_iteration = table.optimizers
    self_cpu = _column(table, "self_cpu_us", row)
    calls = round(sum(_column(table, "calls", row)))
    several = len(table) > 1
    return OptimizerRecord(
        classes=tuple(dict.fromkeys(c for m in per_iteration if m for c in m.classes)),
        calls=calls,
        self_cpu_us=Stat.of(self_cpu),
        self_device_us=Stat.of(_column(table, "self_device_us", row)) if use_device else None,
        parts=_parts(per_iteration, several),
        ops=ops,
        per_iteration=Series.of(self_cpu) if several else None,
    )


def _column(table: MeasureTable, field: str, row: int) -> list[float]:
    matrix = table.path_matrix(field)
    return [0.0] * len(table) if matrix is None else list(matrix[:, row].tolist())


def _parts(measures: list[OptimizerMeasure | None], several: bool) -> tuple[OptimizerPart, ...]:
    """The parts in their fixed order, then each param group's span of the step (only with two
    or more groups: one group's span is the step itself)."""
    seen = {p for m in measures if m for p in m.parts}
    names = [p for p in OPTIMIZER_PARTS if p in seen] + sorted(seen - set(OPTIMIZER_PARTS))
    parts = [
        _part(
            name,
            [m.parts.get(name, 0.0) if m else 0.0 for m in measures],
            several,
            calls=sum(m.part_calls.get(name, 0) for m in measures if m),
        )
        for name in names
    ]
    groups = list(dict.fromkeys(g for m in measures if m for g in m.groups))
    if len(groups) >= 2:
        parts += [
            _part(g, [m.groups.get(g, 0.0) if m else 0.0 for m in measures], several, "step")
            for g in groups
        ]
    return tuple(parts)


def _part(
    name: str, values: list[float], several: bool, within: str = "", calls: int = 0
) -> OptimizerPart:
    return OptimizerPart(
        name=name,
        cpu_us=Stat.of(values),
        calls=calls,
        within=within,
        per_iteration=Series.of(values) if several else None,
    )


__all__ = ["optimizer_record"]
