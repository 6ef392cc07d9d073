"""The torchprof-style text table: a box-drawing tree of module names with one column per measure.

Columns: Self CPU total, CPU total; Self CUDA total, CUDA total only when device time was measured;
Self CPU Mem, CPU Mem (and Self CUDA Mem, CUDA Mem with a device) only when memory was profiled;
Number of Calls (per iteration when the session has several). With backward, the backward self and
total time follow the forward ones. Times are per-iteration medians, formatted as torchprof did
(us/ms/s, B/KB/MB); where the session kept enough iterations, the CPU times carry their 95%
confidence interval (`84.200us ±3%`, see `reporting.trust`). `show_events` adds the ops under
each layer, heaviest first (a backward op's times under the backward columns): at most
`max_events` of them (`analysis.op_list`; None lists every op), and for the rest one
`... K more ops (time)` row per pass holding their summed self figures, so each self column still
adds up to the layer's.

A last row, `(outside modules)`, holds the profiled time in no profiled module (the loss, backward
glue, code around the model), so the Self CPU column adds up to the whole iteration; its ops hang
under it with `show_events`, and a line under the table names its heaviest ops and where they
likely come from (`outside_line`); a container
that never runs itself (ModuleList) shows its children's total and no calls. A training step's
optimizer comes before it: the `(optimizer)` row (its total, with its ops under it with
`show_events`) and its parts (step, with each param group's share under it, clip_grad,
grad_scaler, zero_grad). Every figure comes from the layer table (`analysis.layer_table`) and
every column from its registry (`reporting.layer_columns`); a figure a row does not have is an
empty cell.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from hybridprof.analysis.layer_table import LayerTable, layer_table
from hybridprof.analysis.op_list import MAX_EVENTS, LeftOut, op_list
from hybridprof.analysis.outside_ops import outside_note
from hybridprof.analysis.tree import TreeNode
from hybridprof.datamodel import OpStat, ProfileSession
from hybridprof.reporting.format import format_time_us, visible
from hybridprof.reporting.layer_columns import (
    BY_KEY,
    LayerColumn,
    op_cells,
    op_rest_cells,
    present,
    text_cells,
    title,
)


class TableText(str):
    """A table as text that also shows as itself where Python shows a value's repr: a notebook
    cell ending in `prof.display(show_events=True)` shows the table, not a quoted string full of
    `\n`. It is a `str` in every other way (torchprof's `display` returned one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text view
        printer.text(str(self))


# The columns in torchprof's order (each where the session has it; `reporting.layer_columns`).
TEXT_COLUMNS = (
    "self", "total", "bwd-self", "bwd-total", "dev-self", "dev-total", "mem-self", "mem",
    "dev-mem-self", "dev-mem", "flops", "intensity", "gflops", "verdict", "gather",
    "gather-bytes", "copy-out", "regather", "scatter", "scatter-bytes", "exposed", "wait",
    "waited-for", "compute", "tp-fwd", "tp-fwd-bytes", "bwd-compute", "tp-bwd", "tp-bwd-bytes",
    "tp-group", "calls", "fused",
)  # fmt: skip


# The text export's columns: a compensated table's raw times beside the compensated ones
# (`str(prof)` keeps torchprof's columns; its one line says the raw figures are in the reports).
RAW_TEXT_COLUMNS = tuple(
    key
    for column in TEXT_COLUMNS
    for key in (
        (column, f"raw-{column}")
        if column in ("self", "total", "bwd-self", "bwd-total")
        else (column,)
    )
)


def columns(table: LayerTable, raw: bool = False) -> list[LayerColumn]:
    """The columns this table has data for, in torchprof's order (`raw`: with the raw times of a
    compensated table beside its own)."""
    return present(RAW_TEXT_COLUMNS if raw else TEXT_COLUMNS, table)


def render_text(
    session: ProfileSession,
    show_events: bool = False,
    max_depth: int | None = None,
    outside_row: bool = True,
    only: Collection[str] | None = None,
    max_events: int | None = MAX_EVENTS,
    raw: bool = False,
) -> TableText:
    """The tree table as one string (no trailing newline); `outside_row=False` leaves out the
    `(outside modules)` row (torchprof's table had none), `only` keeps just those paths' rows,
    `max_events` is how many ops a layer lists with `show_events` (None: every one), `raw` puts
    a compensated table's raw times beside its own (the text export)."""
    table = layer_table(session)
    cols = columns(table, raw)
    cells = text_cells(cols)
    rows = [
        r
        for r in table.tree()
        if (max_depth is None or r.depth <= max_depth) and (only is None or r.path in only)
    ]
    body: list[list[str]] = []
    for row, prefix in zip(rows, tree_prefixes(rows), strict=True):
        body.append([prefix + row.name, *cells(row)])
        if show_events and row.record is not None and row.kind == "layer":
            body.extend(op_rows(row.record.ops, prefix, cols, max_events))
    optimizer = list(table.optimizer())
    for row, prefix in zip(optimizer, tree_prefixes(optimizer), strict=True):
        body.append([prefix + row.name, *cells(row)])
        if show_events and row.kind == "optimizer" and session.optimizer is not None:
            body.extend(op_rows(session.optimizer.ops, prefix, cols, max_events))
    outside = table.outside()
    if outside_row and outside is not None:
        body.append([outside.name, *cells(outside)])
        if show_events:
            body.extend(op_rows(session.outside_ops, "", cols, max_events))
    header = [title(c.text, table) for c in [BY_KEY["name"], *cols] if c.text is not None]
    note = outside_line(session) if outside_row else None
    return TableText(format_table(header, body) + (f"\n{visible(note)}" if note else ""))


# Under this share of the headline the outside row is a rounding error: no line says what it is.
OUTSIDE_NOTE_MIN_PCT = 1.0


def outside_line(session: ProfileSession) -> str | None:
    """The line under the table that says what the `(outside modules)` row holds: its heaviest
    ops and where such time comes from (`analysis.outside_ops`); None where the row is under
    OUTSIDE_NOTE_MIN_PCT of the headline or has no ops (older files)."""
    outside = layer_table(session).outside()
    note = outside_note(session)
    if outside is None or note is None or (outside.pct_self or 0.0) < OUTSIDE_NOTE_MIN_PCT:
        return None
    return f"{outside.name} holds {note}"


def op_rows(
    ops: Sequence[OpStat],
    prefix: str,
    cols: Sequence[LayerColumn],
    max_events: int | None,
    shown: Callable[[LayerColumn], bool] = lambda _: True,
) -> list[list[str]]:
    """A layer's op rows (name, then one cell per column; `shown` columns carry op figures): its
    heaviest `max_events` ops, then a `... K more ops (time)` row per pass for the rest
    (`analysis.op_list`)."""
    chosen = op_list(ops, max_events)
    lead = op_lead(prefix)
    cells, rest_cells = op_cells(cols, shown), op_rest_cells(cols, shown)
    rows = [[lead + _short(op.name), *cells(op)] for op in chosen.listed]
    return rows + [
        [lead + left_out_name(rest), *rest_cells(rest.summed)] for rest in chosen.left_out
    ]


def left_out_name(rest: LeftOut) -> str:
    what = "backward op" if rest.summed.backward else "op"
    plural = "" if rest.ops == 1 else "s"
    return f"... {rest.ops} more {what}{plural} ({format_time_us(rest.summed.self_cpu_us)})"


OP_NAME_MAX = 48  # longer op names (autograd's `evaluate_function: ...`) are cut in the middle


def op_lead(prefix: str) -> str:
    """Ops hang under their layer: the layer's tree line continued, then the op name indented
    (cut in the middle past OP_NAME_MAX, so its start and its end show)."""
    return prefix.replace("├──", "│  ").replace("└──", "   ") + "    "


def _short(name: str) -> str:
    if len(name) <= OP_NAME_MAX:
        return name
    head = (OP_NAME_MAX - 1) // 2
    return name[:head] + "…" + name[len(name) - (OP_NAME_MAX - 1 - head) :]


def tree_prefixes(rows: Sequence[TreeNode]) -> list[str]:
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
    "OUTSIDE_NOTE_MIN_PCT",
    "TEXT_COLUMNS",
    "TableText",
    "columns",
    "format_table",
    "left_out_name",
    "op_lead",
    "op_rows",
    "outside_line",
    "render_text",
    "tree_prefixes",
]
