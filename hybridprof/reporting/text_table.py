"""The torchprof-style text table: a box-drawing tree of module names with one column per measure.

Columns: Self CPU total, CPU total; Self CUDA total, CUDA total only when device time was measured;
Self CPU Mem, CPU Mem (and Self CUDA Mem, CUDA Mem with a device) only when memory was profiled;
Number of Calls (per iteration when the session has several). With backward, the backward self and
total time follow the forward ones. Times are per-iteration medians, formatted as torchprof did
(us/ms/s, B/KB/MB); where the session kept enough iterations, the CPU times carry their 95%
confidence interval (`84.200us ±3%`, see trust.py). `show_events` adds one row per op under each
layer (backward ops carry their own forward-looking columns: an op's self/total is its time, in
whichever pass it ran).

A last row, `(outside modules)`, holds the profiled time in no profiled module (the loss, backward
glue, code around the model), so the Self CPU column adds up to the whole iteration; a container
that never runs itself (ModuleList) shows its children's total and no calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from hybridprof.analysis.roofline import LayerRoofline, by_path
from hybridprof.analysis.tree import TreeRow, outside_label, tree_rows
from hybridprof.datamodel import ModuleRecord, OpStat, ProfileSession
from hybridprof.reporting.format import (
    format_bytes,
    format_calls,
    format_count,
    format_rate,
    format_time_us,
    visible,
)
from hybridprof.reporting.trust import (
    time_with_interval,
)


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    of_record: Callable[[ModuleRecord], str]
    of_op: Callable[[OpStat], str]
    inclusive: bool = False  # a subtree total: what a container that never runs still has


def columns(session: ProfileSession) -> list[Column]:
    """The columns this session has data for, in torchprof's order."""
    cols = [
        Column("Self CPU total", _self_cpu, lambda o: format_time_us(o.self_cpu_us)),
        Column("CPU total", _total_cpu, lambda o: format_time_us(o.total_cpu_us), inclusive=True),
    ]
    if session.backward:
        cols += [
            Column(
                "Self CPU (backward)",
                lambda r: _time(r.backward_self_cpu_us),
                lambda o: "",
            ),
            Column(
                "CPU total (backward)",
                lambda r: _time(r.backward_total_cpu_us),
                lambda o: "",
                inclusive=True,
            ),
        ]
    if session.use_device:
        cols += [
            Column(
                "Self CUDA total",
                lambda r: _time(r.self_device_us),
                lambda o: format_time_us(o.self_device_us),
            ),
            Column(
                "CUDA total",
                lambda r: _time(r.total_device_us),
                lambda o: format_time_us(o.total_device_us),
                inclusive=True,
            ),
        ]
    if session.profile_memory:
        cols += [
            Column(
                "Self CPU Mem",
                lambda r: format_bytes(r.self_cpu_mem),
                lambda o: format_bytes(o.self_cpu_mem),
            ),
            Column(
                "CPU Mem",
                lambda r: format_bytes(r.cpu_mem),
                lambda o: format_bytes(o.cpu_mem),
                inclusive=True,
            ),
        ]
        if session.use_device:
            cols += [
                Column(
                    "Self CUDA Mem",
                    lambda r: format_bytes(r.self_device_mem),
                    lambda o: format_bytes(o.self_device_mem),
                ),
                Column(
                    "CUDA Mem",
                    lambda r: format_bytes(r.device_mem),
                    lambda o: format_bytes(o.device_mem),
                    inclusive=True,
                ),
            ]
    cols += roofline_columns(session)
    iterations = session.iterations
    cols.append(
        Column(
            session.calls_title(),
            lambda r: format_calls(r.calls_per_iteration(iterations)),
            lambda o: str(o.calls),
        )
    )
    return cols


def roofline_columns(session: ProfileSession) -> list[Column]:
    """With --flops: the layer's FLOPs, intensity, achieved GFLOP/s and verdict for one step."""
    if session.flops is None:
        return []
    lines = by_path(session)

    def cell(show: Callable[[LayerRoofline], str]) -> Callable[[ModuleRecord], str]:
        return lambda r: show(lines[r.path]) if r.path in lines else ""

    return [
        Column("FLOPs", cell(lambda x: format_count(x.flops, "")), lambda o: ""),
        Column("FLOP/B", cell(lambda x: format_rate(x.intensity, "")), lambda o: ""),
        Column("GFLOP/s", cell(lambda x: format_rate(x.gflops, "")), lambda o: ""),
        Column("Verdict", cell(lambda x: x.verdict), lambda o: ""),
    ]


def _self_cpu(record: ModuleRecord) -> str:
    series = record.per_iteration.self_cpu_us if record.per_iteration else None
    return time_with_interval(record.self_cpu_us.median, series)


def _total_cpu(record: ModuleRecord) -> str:
    series = record.per_iteration.total_cpu() if record.per_iteration else None
    return time_with_interval(record.total_cpu_us.median, series)


def _time(stat: object) -> str:
    median = getattr(stat, "median", None)
    return format_time_us(median) if isinstance(median, float | int) else ""


def render_text(
    session: ProfileSession,
    show_events: bool = False,
    max_depth: int | None = None,
    outside_row: bool = True,
    only: Collection[str] | None = None,
) -> str:
    """The tree table as one string (no trailing newline); `outside_row=False` leaves out the
    `(outside modules)` row (torchprof's table had none), `only` keeps just those paths' rows."""
    cols = columns(session)
    rows = [
        r
        for r in tree_rows(session)
        if (max_depth is None or r.depth <= max_depth) and (only is None or r.path in only)
    ]
    body: list[list[str]] = []
    for row, prefix in zip(rows, _tree_prefixes(rows), strict=True):
        body.append([prefix + row.name, *_record_cells(row, cols)])
        if show_events and row.record is not None and not row.derived:
            body.extend(_op_rows(row.record, prefix, cols))
    if outside_row and session.outside_cpu_us is not None:
        body.append(_outside_cells(session, cols))
    return format_table(["Module", *(c.title for c in cols)], body)


def _outside_cells(session: ProfileSession, cols: list[Column]) -> list[str]:
    """Outside time sits in the CPU columns (forward and backward together: it is one amount)."""
    assert session.outside_cpu_us is not None
    time = format_time_us(session.outside_cpu_us.median)
    cells = [time, time] + [""] * (len(cols) - 2)
    return [outside_label(session), *cells]


def _record_cells(row: TreeRow, cols: list[Column]) -> list[str]:
    if row.record is None:
        return [""] * len(cols)
    # A container that never runs shows its children's totals only: no self time, no calls.
    return [c.of_record(row.record) if c.inclusive or not row.derived else "" for c in cols]


def _op_rows(record: ModuleRecord, prefix: str, cols: list[Column]) -> list[list[str]]:
    # Ops hang under their layer: continue the layer's tree line, then indent the op name.
    lead = prefix.replace("├──", "│  ").replace("└──", "   ") + "    "
    return [[lead + op.name, *(c.of_op(op) for c in cols)] for op in record.ops]


def _tree_prefixes(rows: list[TreeRow]) -> list[str]:
    """Box-drawing prefixes (`│   ├── `) for rows in tree order; the root has none."""
    last = _last_child_flags(rows)
    prefixes = []
    for row in rows:
        if row.depth == 0:
            prefixes.append("")
            continue
        chain = _chain(row.path)  # ancestors below the root, then the row itself
        lines = ["    " if last[p] else "│   " for p in chain[:-1]]
        prefixes.append("".join(lines) + ("└── " if last[row.path] else "├── "))
    return prefixes


def _chain(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _last_child_flags(rows: list[TreeRow]) -> dict[str, bool]:
    """For each shown path: is it the last shown child of its parent?"""
    last_of_parent: dict[str, str] = {}
    for row in rows:
        if row.depth > 0:
            parent = row.path.rsplit(".", 1)[0] if "." in row.path else ""
            last_of_parent[parent] = row.path
    return {row.path: last_of_parent.get(_parent(row.path)) == row.path for row in rows}


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def format_table(header: list[str], body: list[list[str]]) -> str:
    body = [[visible(cell) for cell in row] for row in body]  # names from models and files
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [_line(header, widths), "-|-".join("-" * w for w in widths)]
    lines += [_line(r, widths) for r in body]
    return "\n".join(line.rstrip() for line in lines)


def _line(cells: list[str], widths: list[int]) -> str:
    return " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))


__all__ = [
    "Column",
    "columns",
    "render_text",
    "roofline_columns",
]
