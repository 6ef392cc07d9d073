"""The layer table's columns and cells, shared by the PDF (rendered by the template) and the HTML
report (sent to the page as compact JSON arrays, and drawn there by report.js).

The HTML table scrolls sideways inside its own box (its first column stays put); a PDF page cannot
scroll, so its table is split into parts that each fit the page's width (`pdf_parts`), each
starting with the Layer column, every row in each part: the times first, then what is left.

The HTML report does not render its rows server-side: a 10,000-layer model has 11,000 rows, whose
markup alone was too big for Chromium to lay out quickly (figures: benchmarks/README.md,
bench_reports). The page gets every row as data and
draws only the rows on screen (see report.js); the PDF, which has no script, renders its (limited)
rows from the same cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from hybridprof.reporting.page.context import ReportContext
from hybridprof.reporting.page.rows import RowView

Sort = Literal["tree", "text", "num", ""]  # "": the column does not sort

# Bits of a row's flags in the page's data (report.js reads the same values).
HAS_CHILDREN, COLLAPSED, UNPROFILED, DERIVED, OUTSIDE = 1, 2, 4, 8, 16


@dataclass(frozen=True, slots=True)
class Column:
    key: str  # the RowView field shown (`params` is formatted with thousands separators)
    label: str
    css: str  # the cells' class
    sort: Sort = ""
    value: str = ""  # the RowView field a "num" column sorts by
    title: str = ""


def _num(key: str, label: str, value: str = "", title: str = "") -> Column:
    return Column(key, label, "num", "num" if value else "", value, title)


def layer_columns(ctx: ReportContext) -> tuple[Column, ...]:
    """The columns the session has data for, in the table's order."""
    calls = "Calls" if ctx.calls_title == "Number of Calls" else "Calls/iter"
    both = " + backward" if ctx.has_backward else ""
    cols = [
        Column("name", "Layer", "name", "tree"),
        Column("class_name", "Class", "cls", "text"),
        _num("calls_text", calls, "calls", ctx.calls_title),
        _num("self_cpu", "Self CPU", "self_us"),
        _num("total_cpu", "Total CPU", "total_us"),
    ]
    if ctx.has_device:
        cols += [
            _num("self_device", "Self device", "self_device_us"),
            _num("total_device", "Total device", "total_device_us"),
        ]
    if ctx.has_backward:
        cols += [
            _num("backward", "Backward self", "backward_us"),
            _num("backward_total", "Backward total", "backward_total_us"),
        ]
    cols += [
        Column(
            "self_pct_text", "Self %", "num pct", "num", "self_pct",
            f"Own time (forward{both}) as a share of the median iteration; these add up to 100%",
        ),
        _num("pct_text", "Total %", "pct",
             f"Subtree time (forward{both}) as a share of the median iteration"),
    ]  # fmt: skip
    if ctx.has_memory:
        cols.append(
            _num("memory", "Net self mem", "memory_bytes",
                 "Allocated less freed by its own ops in the forward (torchprof's Self CPU Mem): "
                 "the one figure that can be negative")
        )  # fmt: skip
    if ctx.memory is not None:
        cols += [
            _num("mem_peak", "Peak (fwd)", "mem_peak_bytes",
                 "The most bytes live in its forward calls above what was live when each began"),
            _num("mem_saved", "Saved", "mem_saved_bytes",
                 "Bytes its forward saved for backward (each storage once; parameters apart)"),
        ]  # fmt: skip
        if ctx.has_backward:
            cols.append(
                _num("mem_backward_peak", "Peak (bwd)", "mem_backward_peak_bytes",
                     "The most bytes live during its backward above what was live when it began")
            )  # fmt: skip
    if ctx.roofline:
        cols += [
            _num("flops", "FLOPs"),
            _num("gflops", "GFLOP/s"),
            Column("verdict", "Verdict", "verdict"),
        ]
    cols += [
        Column("spread", "Spread (self, min–max)", "num spread"),
        _num("params", "Params", "params"),
        Column("output_shape", "Output", "shape"),
    ]
    return tuple(cols)


# The PDF's layer table (print.css: A4 landscape, 12 mm margins, 7.5 pt): the line's width in
# points and what a character and a cell's padding take, for the estimate of what fits.
PDF_LINE_PT = 720.0
PDF_CHAR_PT = 4.6
PDF_PADDING_PT = 7.0
PDF_INDENT_EM = 0.8  # print.css's td.dN: 0.2 em + 0.8 em per level
WRAPS = {"verdict": 22, "output_shape": 18}  # cells that wrap between words: their line's chars


def pdf_parts(columns: tuple[Column, ...], rows: tuple[RowView, ...]) -> list[tuple[Column, ...]]:
    """The columns in parts that each fit the PDF page, each part led by the Layer column (the
    first); a part takes columns in their order while they fit."""
    name, rest = columns[0], columns[1:]
    first = _pdf_width(name, rows)
    parts: list[list[Column]] = [[name]]
    used = first
    for column in rest:
        width = _pdf_width(column, rows)
        if used + width > PDF_LINE_PT and len(parts[-1]) > 1:
            parts.append([name])
            used = first
        parts[-1].append(column)
        used += width
    return [tuple(part) for part in parts]


def _pdf_width(column: Column, rows: tuple[RowView, ...]) -> float:
    """The points a column needs: its longest cell (a wrapping one's line), or its header's
    longest word (headers wrap between words)."""
    if column.key == "name":
        indent = max((PDF_INDENT_EM * 7.5 * min(r.depth, 12) for r in rows), default=0.0)
        chars = max((len(r.name) for r in rows), default=0)
        return chars * PDF_CHAR_PT + indent + PDF_PADDING_PT
    cells = [len(cell_text(r, column)) for r in rows]
    chars = min(max(cells, default=0), WRAPS.get(column.key, 10**6))
    word = max(len(w) for w in column.label.split())
    return max(chars, word) * PDF_CHAR_PT + PDF_PADDING_PT


def cell_text(row: RowView, column: Column) -> str:
    if column.key == "params":
        return f"{row.params:,}" if row.params else ""
    text: str = getattr(row, column.key)
    return text


def row_flags(row: RowView) -> int:
    return (
        (HAS_CHILDREN if row.has_children else 0)
        | (COLLAPSED if row.collapsed else 0)
        | (0 if row.profiled else UNPROFILED)
        | (DERIVED if row.derived else 0)
        | (OUTSIDE if row.outside else 0)
    )


def table_data(ctx: ReportContext) -> dict[str, Any]:
    """The table for the page: its columns, and one array per row in tree order:
    `[path, parent index (-1 at a root), depth, flags, heat, op count, [cell texts], [sort values]]`
    (sort values: one per column that sorts by number, in column order)."""
    columns = layer_columns(ctx)
    numeric = [c for c in columns if c.sort == "num"]
    index = {row.path: i for i, row in enumerate(ctx.rows)}
    rows = [
        [
            row.path,
            -1 if row.parent is None else index.get(row.parent, -1),
            row.depth,
            row_flags(row),
            row.heat,
            row.op_count,
            [cell_text(row, c) for c in columns],
            [_compact(getattr(row, c.value)) for c in numeric],
        ]
        for row in ctx.rows
    ]
    return {
        "columns": [
            {"label": c.label, "css": c.css, "sort": c.sort, "title": c.title} for c in columns
        ],
        "rows": rows,
    }


def _compact(value: float) -> float | int:
    """To the thousandth (of a us, a %, a call: finer changes no order a person reads), whole
    numbers as ints: `340` is shorter than `340.0` in the page's JSON. (Thousandths as an integer
    over 1000: its shortest repr is those digits, and it is much faster than round().)"""
    if not math.isfinite(value):
        return 0
    thousandths = math.floor(value * 1000 + 0.5)
    return thousandths // 1000 if thousandths % 1000 == 0 else thousandths / 1000
