"""The layer table of the HTML and PDF pages: its rows, its columns (chosen from the registry,
`reporting.layer_columns`), the page script's data and the PDF's parts.

The HTML table scrolls sideways inside its own box (its first column stays put); a PDF page cannot
scroll, so its table is split into parts that each fit the page's width (`pdf_parts`), each
starting with the Layer column, every row in each part: the times first, then what is left.

The HTML report does not render its rows server-side: a 10,000-layer model has 11,000 rows, whose
markup alone was too big for Chromium to lay out quickly (figures: benchmarks/README.md,
bench_reports). The page gets every row as data and draws only the rows on screen (see
report.js); the PDF, which has no script, renders its (limited) rows from the same cells.
Formatting only: every figure is the layer table's (`analysis.layer_table`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hybridprof.analysis.layer_table import LayerRow, LayerTable
from hybridprof.datamodel import OpStat
from hybridprof.reporting.format import format_bytes, format_time_us
from hybridprof.reporting.layer_columns import (
    RAW_KEYS,
    LayerColumn,
    Sort,
    page_cell,
    present,
    title,
)
from hybridprof.reporting.trust import timing_text

# The page's columns in its order (each where the session has it).
PAGE_COLUMNS = (
    "name", "class", "calls", "self", "total", "raw-self", "raw-total", "dev-self", "dev-total",
    "bwd-self", "bwd-total", "raw-bwd-self", "raw-bwd-total", "share", "subtree-share",
    "mem-self", "mem-peak", "mem-saved", "mem-bwd-peak", "flops", "gflops", "verdict", "gather",
    "gather-bytes", "copy-out", "regather", "scatter", "scatter-bytes", "exposed", "wait",
    "waited-for", "compute", "tp-fwd", "tp-fwd-bytes", "bwd-compute", "tp-bwd", "tp-bwd-bytes",
    "tp-group", "spread", "params", "output",
)  # fmt: skip

# Bits of a row's flags in the page's data (report.js reads the same values).
HAS_CHILDREN, COLLAPSED, UNPROFILED, DERIVED, OUTSIDE = 1, 2, 4, 8, 16


@dataclass(frozen=True, slots=True)
class Column:
    """A column as the page's header shows it."""

    key: str  # the registry's key
    label: str
    css: str  # the cells' class
    sort: Sort = ""
    title: str = ""  # the header's tooltip
    source: LayerColumn | None = None  # the registry's column, which makes its cells


@dataclass(frozen=True, slots=True)
class RowView:
    """One line of the tree table: where it sits, the raw numbers the page's charts and limits
    use, and its layer table row (which the columns' cells are made from)."""

    path: str
    name: str
    depth: int
    parent: str | None
    class_name: str
    profiled: bool  # has figures: a layer, a container's totals, the optimizer's or outside rows
    has_children: bool
    self_us: float
    total_us: float
    backward_us: float
    pct: float  # subtree (inclusive) share of the iteration, forward plus backward
    self_pct: float  # own share of the iteration: the rows' self shares add up to ~100%
    heat: int  # 0..5: self time relative to the heaviest row, for shading
    self_cpu: str
    op_count: int
    layer: LayerRow
    derived: bool = False  # a container that never runs: its children's totals only
    outside: bool = False  # the row of time in no profiled module
    collapsed: bool = False  # the HTML tree opens with this row's children hidden


@dataclass(frozen=True, slots=True)
class OpView:
    name: str
    calls: int
    self_cpu: str
    total_cpu: str
    self_device: str
    memory: str
    backward: bool


def page_columns(table: LayerTable, pdf: bool = False) -> tuple[Column, ...]:
    """The columns the session has data for, in the table's order. The PDF's leave out the raw
    times of a compensated table (the HTML has them): its parts would not fit the page."""
    keys = [k for k in PAGE_COLUMNS if not (pdf and k in RAW_KEYS)]
    return tuple(_column(c, table) for c in present(keys, table))


def _column(column: LayerColumn, table: LayerTable) -> Column:
    page = column.page
    assert page is not None, f"{column.key} is not a column of the page"
    label = title(page.title, table)
    return Column(column.key, label, page.css, page.order, title(page.tip, table), column)


def _heat(self_us: float, peak: float) -> int:
    return 0 if peak <= 0 else min(5, int(6 * self_us / peak))


def row_view(row: LayerRow, peak: float) -> RowView:
    """A layer table row as the page places it (`peak`: the heaviest layer's self time)."""
    outside = row.kind == "outside"
    self_us = row.self_cpu.median if row.self_cpu else 0.0
    return RowView(
        path=row.path,
        name=row.name,
        depth=row.depth,
        parent=row.parent,
        class_name=row.class_name,
        # a layer, a container with its children's totals, the optimizer's rows, the outside row
        profiled=row.record is not None or row.kind in ("optimizer", "optimizer_part") or outside,
        has_children=row.has_children,
        self_us=self_us,
        total_us=row.total_cpu.median if row.total_cpu else 0.0,
        backward_us=row.backward_self_cpu_us or 0.0,
        pct=row.pct_total or 0.0,
        self_pct=row.pct_self or 0.0,
        heat=_heat(self_us, peak),
        self_cpu=timing_text(row.self_cpu),
        op_count=row.op_count,
        layer=row,
        derived=row.kind in ("container", "optimizer"),
        outside=outside,
    )


def op_view(o: OpStat) -> OpView:
    return OpView(
        name=o.name,
        calls=o.calls,
        self_cpu=format_time_us(o.self_cpu_us),
        total_cpu=format_time_us(o.total_cpu_us),
        self_device=format_time_us(o.self_device_us),
        memory=format_bytes(o.self_cpu_mem),
        backward=o.backward,
    )


def cell_text(row: RowView, column: Column) -> str:
    assert column.source is not None
    return page_cell(column.source, row.layer)


def row_flags(row: RowView) -> int:
    return (
        (HAS_CHILDREN if row.has_children else 0)
        | (COLLAPSED if row.collapsed else 0)
        | (0 if row.profiled else UNPROFILED)
        | (DERIVED if row.derived else 0)
        | (OUTSIDE if row.outside else 0)
    )


def table_data(columns: tuple[Column, ...], rows: tuple[RowView, ...]) -> dict[str, Any]:
    """The table for the page: its columns, and one array per row in tree order:
    `[path, parent index (-1 at a root), depth, flags, heat, op count, [cell texts], [sort values]]`
    (sort values: one per column that sorts by number, in column order)."""
    numeric = [c.source.sort for c in columns if c.sort == "num" and c.source is not None]
    index = {row.path: i for i, row in enumerate(rows)}
    data = [
        [
            row.path,
            -1 if row.parent is None else index.get(row.parent, -1),
            row.depth,
            row_flags(row),
            row.heat,
            row.op_count,
            [cell_text(row, c) for c in columns],
            [_compact(sort(row.layer) or 0) for sort in numeric if sort is not None],
        ]
        for row in rows
    ]
    header = [{"label": c.label, "css": c.css, "sort": c.sort, "title": c.title} for c in columns]
    return {"columns": header, "rows": data}


def _compact(value: float) -> float | int:
    """To the thousandth (of a us, a %, a call: finer changes no order a person reads), whole
    numbers as ints: `340` is shorter than `340.0` in the page's JSON. (Thousandths as an integer
    over 1000: its shortest repr is those digits, and it is much faster than round().)"""
    if not math.isfinite(value):
        return 0
    thousandths = math.floor(value * 1000 + 0.5)
    return thousandths // 1000 if thousandths % 1000 == 0 else thousandths / 1000


# The PDF's layer table (print.css: A4 landscape, 12 mm margins, 7.5 pt): the line's width in
# points and what a character and a cell's padding take, for the estimate of what fits.
PDF_LINE_PT = 720.0
PDF_CHAR_PT = 4.6
PDF_PADDING_PT = 7.0
PDF_INDENT_EM = 0.8  # print.css's td.dN: 0.2 em + 0.8 em per level
WRAPS = {"verdict": 22, "output": 18}  # cells that wrap between words: their line's chars


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


__all__ = [
    "COLLAPSED",
    "DERIVED",
    "HAS_CHILDREN",
    "OUTSIDE",
    "PAGE_COLUMNS",
    "UNPROFILED",
    "Column",
    "OpView",
    "RowView",
    "cell_text",
    "op_view",
    "page_columns",
    "pdf_parts",
    "row_flags",
    "row_view",
    "table_data",
]
