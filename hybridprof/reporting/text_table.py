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
that never runs itself (ModuleList) shows its children's total and no calls. A training step's
optimizer comes before it: the `(optimizer)` row (its total, with its ops under it with
`show_events`) and its parts (step, with each param group's share under it, clip_grad,
grad_scaler, zero_grad). Every figure comes from the layer table (`analysis.layer_table`); a
figure a row does not have is an empty cell.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table
from hybridprof.analysis.roofline import LayerRoofline
from hybridprof.datamodel import OpStat, ProfileSession
from hybridprof.reporting.format import (
    format_bytes,
    format_calls,
    format_count,
    format_rate,
    format_time_us,
    visible,
)
from hybridprof.reporting.trust import timing_text


class TableText(str):
    """A table as text that also shows as itself where Python shows a value's repr: a notebook
    cell ending in `prof.display(show_events=True)` shows the table, not a quoted string full of
    `\n`. It is a `str` in every other way (torchprof's `display` returned one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text view
        printer.text(str(self))


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    of_row: Callable[[LayerRow], str]
    of_op: Callable[[OpStat], str]


def _time(us: float | None) -> str:
    return "" if us is None else format_time_us(us)


def _bytes(n: int | None) -> str:
    return "" if n is None else format_bytes(n)


def _no_op(_: OpStat) -> str:
    return ""


def columns(table: LayerTable) -> list[Column]:
    """The columns this table has data for, in torchprof's order."""
    cols = [
        Column("Self CPU total", lambda r: timing_text(r.self_cpu), lambda o: _time(o.self_cpu_us)),
        Column("CPU total", lambda r: timing_text(r.total_cpu), lambda o: _time(o.total_cpu_us)),
    ]
    if table.has_backward:
        cols += [
            Column("Self CPU (backward)", lambda r: _time(r.backward_self_cpu_us), _no_op),
            Column("CPU total (backward)", lambda r: _time(r.backward_total_cpu_us), _no_op),
        ]
    if table.has_device:
        cols += [
            Column(
                "Self CUDA total",
                lambda r: _time(r.self_device_us),
                lambda o: _time(o.self_device_us),
            ),
            Column(
                "CUDA total", lambda r: _time(r.total_device_us), lambda o: _time(o.total_device_us)
            ),
        ]
    if table.has_memory:
        cols += [
            Column(
                "Self CPU Mem", lambda r: _bytes(r.self_cpu_mem), lambda o: _bytes(o.self_cpu_mem)
            ),
            Column("CPU Mem", lambda r: _bytes(r.cpu_mem), lambda o: _bytes(o.cpu_mem)),
        ]
        if table.has_device:
            cols += [
                Column(
                    "Self CUDA Mem",
                    lambda r: _bytes(r.self_device_mem),
                    lambda o: _bytes(o.self_device_mem),
                ),
                Column("CUDA Mem", lambda r: _bytes(r.device_mem), lambda o: _bytes(o.device_mem)),
            ]
    cols += roofline_columns(table)
    cols.append(Column(table.calls_title, _calls, lambda o: str(o.calls)))
    if table.has_compiled:
        cols.append(Column("Fused", lambda r: ", ".join(r.fused), lambda o: ""))
    return cols


def _calls(row: LayerRow) -> str:
    return "" if row.calls_per_iteration is None else format_calls(row.calls_per_iteration)


def roofline_columns(table: LayerTable) -> list[Column]:
    """With --flops: the layer's FLOPs, intensity, achieved GFLOP/s and verdict for one step."""
    if not table.has_flops:
        return []

    def cell(show: Callable[[LayerRoofline], str]) -> Callable[[LayerRow], str]:
        # only a profiled layer's own work is judged (a container's is its children's)
        return lambda r: show(r.roofline) if r.roofline and r.kind == "layer" else ""

    return [
        Column("FLOPs", cell(lambda x: format_count(x.flops, "")), _no_op),
        Column("FLOP/B", cell(lambda x: format_rate(x.intensity, "")), _no_op),
        Column("GFLOP/s", cell(lambda x: format_rate(x.gflops, "")), _no_op),
        Column("Verdict", cell(lambda x: x.verdict), _no_op),
    ]


def render_text(
    session: ProfileSession,
    show_events: bool = False,
    max_depth: int | None = None,
    outside_row: bool = True,
    only: Collection[str] | None = None,
) -> TableText:
    """The tree table as one string (no trailing newline); `outside_row=False` leaves out the
    `(outside modules)` row (torchprof's table had none), `only` keeps just those paths' rows."""
    table = layer_table(session)
    cols = columns(table)
    rows = [
        r
        for r in table.tree()
        if (max_depth is None or r.depth <= max_depth) and (only is None or r.path in only)
    ]
    body: list[list[str]] = []
    for row, prefix in zip(rows, tree_prefixes(rows), strict=True):
        body.append([prefix + row.name, *(c.of_row(row) for c in cols)])
        if show_events and row.record is not None and row.kind == "layer":
            body.extend(_op_rows(row.record.ops, prefix, cols))
    optimizer = list(table.optimizer())
    for row, prefix in zip(optimizer, tree_prefixes(optimizer), strict=True):
        body.append([prefix + row.name, *(c.of_row(row) for c in cols)])
        if show_events and row.kind == "optimizer" and session.optimizer is not None:
            body.extend(_op_rows(session.optimizer.ops, prefix, cols))
    outside = table.outside()
    if outside_row and outside is not None:
        body.append([outside.name, *(c.of_row(outside) for c in cols)])
    return TableText(format_table(["Module", *(c.title for c in cols)], body))


def _op_rows(ops: tuple[OpStat, ...], prefix: str, cols: list[Column]) -> list[list[str]]:
    names = op_names(ops, prefix)
    return [[name, *(c.of_op(op) for c in cols)] for op, name in zip(ops, names, strict=True)]


def op_names(ops: tuple[OpStat, ...], prefix: str) -> list[str]:
    """Ops hang under their layer: the layer's tree line continued, then the op name indented."""
    lead = prefix.replace("├──", "│  ").replace("└──", "   ") + "    "
    return [lead + op.name for op in ops]


def tree_prefixes(rows: list[LayerRow]) -> list[str]:
    """Box-drawing prefixes (`│   ├── `) for rows in tree order (each row's parent shown before
    it); the root has none. Each row's prefix extends its parent's, so the work is linear in the
    rows and their depth."""
    last_child = {row.parent: row.path for row in rows if row.depth > 0}
    continued: dict[str, str] = {}  # what a row's children put before their own connector
    prefixes = []
    for row in rows:
        if row.depth == 0 or row.parent is None:
            prefixes.append("")
            continued[row.path] = ""
            continue
        is_last = last_child.get(row.parent) == row.path
        lead = continued.get(row.parent, "")
        prefixes.append(lead + ("└── " if is_last else "├── "))
        continued[row.path] = lead + ("    " if is_last else "│   ")
    return prefixes


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
    "TableText",
    "columns",
    "format_table",
    "op_names",
    "render_text",
    "roofline_columns",
    "tree_prefixes",
]
