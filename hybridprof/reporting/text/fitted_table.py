"""The tree table as a terminal shows it: within the terminal's width, in module order unless asked
otherwise, saying what it left out.

Its columns are the layer table's (`reporting.layer_columns`), named by short keys (`--columns
self,total,verdict`), with a Class column torchprof's table did not have. Each column has a rank
(`keep`): when the table is wider than the terminal, the lowest-ranked columns go first (FLOP/B,
memory totals, GFLOP/s, the Class...), until it fits; Self CPU and the names stay. When even that
is too wide, long names are cut in the middle (`blocks.1…attn`). `--sort KEY` orders each
parent's children by that column, largest first; the tree stays a tree. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table
from hybridprof.analysis.op_list import MAX_EVENTS
from hybridprof.analysis.tree import CutRows, with_cuts
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import UsageError
from hybridprof.reporting.format import visible
from hybridprof.reporting.layer_columns import (
    ALWAYS,
    BY_KEY,
    LayerColumn,
    OnTerminal,
    present,
    text_cells,
    title,
)
from hybridprof.reporting.text.text_table import TableText, op_rows, outside_line, tree_prefixes

MIN_NAME = 16  # the Module column is never cut narrower
MODULE_ORDER = "module"
# Every column a printed table can have, in its order (each session has those it measured): what
# --columns and --sort are checked against before a run rather than after it.
COLUMN_KEYS = (
    "class", "self", "total", "bwd-self", "bwd-total", "dev-self", "dev-total", "share",
    "mem-self", "mem", "dev-mem-self", "dev-mem", "flops", "intensity", "gflops", "verdict",
    "gather", "gather-bytes", "copy-out", "regather", "scatter", "scatter-bytes", "exposed",
    "wait", "waited-for", "compute", "tp-fwd", "tp-fwd-bytes", "bwd-compute", "tp-bwd",
    "tp-bwd-bytes", "calls",
)  # fmt: skip
SORT_KEYS = (MODULE_ORDER, "name", *(k for k in COLUMN_KEYS if BY_KEY[k].sort is not None))


@dataclass(frozen=True, slots=True)
class TableChoice:
    """What the user asked of the table: columns (None: those the width allows), the width (None:
    no limit, e.g. output to a file) and the order (a column key, or "module")."""

    columns: tuple[str, ...] | None = None
    width: int | None = None
    sort: str = MODULE_ORDER


@dataclass(frozen=True, slots=True)
class FittedTable:
    text: TableText
    left_out: tuple[str, ...]  # titles of the columns dropped to fit the width
    order: str  # the rows' order, in words
    width: int | None = None
    missing: tuple[str, ...] = ()  # columns asked for that this run has no data for
    # The line right under the table that says what its `(outside modules)` row holds (one
    # line however wide: it is read, not lined up with the columns); empty when none is said.
    under: tuple[str, ...] = ()

    def notes(self) -> list[str]:
        """What a reader should know about the table: its order, and what was left out."""
        lines = [f"rows: {self.order}"]
        if self.left_out:
            lines.append(
                f"columns left out to fit {self.width} characters: {', '.join(self.left_out)} "
                "(--columns to choose, --columns all for every one)"
            )
        if self.missing:
            lines.append(f"not measured in this run, so not shown: {', '.join(self.missing)}")
        return lines


def check_choice(columns: Sequence[str] | None, sort: str) -> None:
    """UsageError for a column or an order no table has (said before any work)."""
    for key in columns or ():
        if key not in (*COLUMN_KEYS, "all"):
            raise UsageError(
                f"unknown column '{key}' for --columns; give some of {', '.join(COLUMN_KEYS)}, "
                "comma-separated, or all"
            )
    if sort not in SORT_KEYS:
        raise UsageError(f"unknown --sort '{sort}'; give one of {', '.join(SORT_KEYS)}")


def term_columns(table: LayerTable) -> list[LayerColumn]:
    """Every printed column this table has data for, in display order."""
    return present(COLUMN_KEYS, table)


def printed(column: LayerColumn) -> OnTerminal:
    """How the printed table shows `column` (one of `COLUMN_KEYS`)."""
    assert column.terminal is not None, f"{column.key} is not a printed column"
    return column.terminal


def chosen_columns(
    table: LayerTable, keys: Sequence[str] | None
) -> tuple[list[LayerColumn], list[str]]:
    """The columns named by `keys` (in that order; "all" or None: every one), and the keys this
    table has no data for (a backward column of a forward-only run)."""
    check_choice(keys, MODULE_ORDER)
    every = term_columns(table)
    if keys is None or "all" in keys:
        return every, []
    by_key = {c.key: c for c in every}
    wanted = list(dict.fromkeys(keys))
    return [by_key[k] for k in wanted if k in by_key], [k for k in wanted if k not in by_key]


Line = LayerRow | CutRows  # a row of the table, or the `... N more` row of rows left out


def ordered_rows(rows: Sequence[Line], sort: str, table: LayerTable) -> list[Line]:
    """The rows in tree order, each parent's children ordered by `sort` (module order, the name,
    or a column's value, largest first; rows without a value keep their order after the rest,
    and a `... N more` row comes last among its siblings)."""
    check_choice(None, sort)
    if sort == MODULE_ORDER or not _sortable(sort, table):
        return list(rows)
    value = _sort_value(sort, table)
    children: dict[str | None, list[Line]] = {}
    paths = {r.path for r in rows}
    for row in rows:
        parent = row.parent if row.parent in paths else None
        children.setdefault(parent, []).append(row)
    ordered: list[Line] = []

    def place(row: Line) -> None:
        ordered.append(row)
        for child in sorted(children.get(row.path, []), key=value):
            place(child)

    for top in sorted(children.get(None, []), key=value):
        place(top)
    return ordered


def _sortable(sort: str, table: LayerTable) -> bool:
    return sort == "name" or any(c.key == sort for c in term_columns(table))


def _sort_value(sort: str, table: LayerTable) -> Callable[[Line], tuple[float, str]]:
    figure = BY_KEY[sort].sort
    assert figure is not None or sort == "name"

    def key(row: Line) -> tuple[float, str]:
        if isinstance(row, CutRows):
            return (math.inf, "\uffff")  # after every row, with or without a value
        if figure is None:
            return (0.0, row.name)
        found = figure(row)
        return (math.inf if found is None else -float(found), "")

    return key


def order_text(sort: str, table: LayerTable) -> str:
    if sort == MODULE_ORDER:
        return "module order, as the model defines them (--sort share: each level heaviest first)"
    if not _sortable(sort, table):
        return f"module order (this run has no column {sort!r} to sort by)"
    if sort == "name":
        return "each level by name"
    return (
        f"each level by {title(printed(BY_KEY[sort]).title, table)}, largest first (the tree kept)"
    )


def fitted_table(
    session: ProfileSession,
    choice: TableChoice,
    show_events: bool = False,
    max_depth: int | None = None,
    only: Collection[str] | None = None,
    max_events: int | None = MAX_EVENTS,
) -> FittedTable:
    """The tree table for a terminal (see the module docstring); with `show_events`, each layer's
    heaviest `max_events` ops (None: every op) and a `... K more ops` row for the rest."""
    table = layer_table(session)
    cols, missing = chosen_columns(table, choice.columns)
    rows = [r for r in table.tree() if max_depth is None or r.depth <= max_depth]
    lines = ordered_rows(rows if only is None else with_cuts(rows, set(only)), choice.sort, table)
    names, cells = _cells(lines, cols, show_events, max_events)
    optimizer = list(table.optimizer())  # a training step's: its rows are part of the headline
    for row, prefix in zip(optimizer, tree_prefixes(optimizer), strict=True):
        names.append(prefix + row.name)
        cells.append(text_cells(cols)(row))
    outside = table.outside()
    if outside is not None:
        names.append(outside.name)
        cells.append(text_cells(cols)(outside))
        if show_events:
            on_terminal = lambda c: printed(c).ops  # noqa: E731
            for name, *op_row in op_rows(session.outside_ops, "", cols, max_events, on_terminal):
                names.append(name)
                cells.append(op_row)
    titles = [title(printed(c).title, table) for c in cols]
    kept = list(range(len(cols)))
    if choice.width is not None and choice.columns is None:
        kept = _fitting([printed(c).keep for c in cols], titles, names, cells, choice.width)
    header = [title(printed(BY_KEY["name"]).title, table), *(titles[i] for i in kept)]
    body = [[name, *(row[i] for i in kept)] for name, row in zip(names, cells, strict=True)]
    text = _format(header, body, choice.width)
    left_out = tuple(t for i, t in enumerate(titles) if i not in kept)
    order = order_text(choice.sort, table)
    note = outside_line(session)
    under = (visible(note),) if note is not None else ()
    return FittedTable(TableText(text), left_out, order, choice.width, tuple(missing), under)


def _cells(
    rows: list[Line], cols: list[LayerColumn], show_events: bool, max_events: int | None
) -> tuple[list[str], list[list[str]]]:
    names: list[str] = []
    cells: list[list[str]] = []
    row_cells = text_cells(cols)

    def on_terminal(column: LayerColumn) -> bool:
        return printed(column).ops

    for row, prefix in zip(rows, tree_prefixes(rows), strict=True):
        if isinstance(row, CutRows):  # rows left out: no figures of its own
            names.append(prefix + row.label)
            cells.append([""] * len(cols))
            continue
        names.append(prefix + row.name)
        cells.append(row_cells(row))
        if show_events and row.record is not None and row.kind == "layer":
            for name, *op_row in op_rows(row.record.ops, prefix, cols, max_events, on_terminal):
                names.append(name)
                cells.append(op_row)
    return names, cells


def _width(cells: list[list[str]], titles: list[str], i: int) -> int:
    return max([len(titles[i]), *(len(visible(row[i])) for row in cells)])


def _fitting(
    keeps: list[int], titles: list[str], names: list[str], cells: list[list[str]], width: int
) -> list[int]:
    """The columns kept (of ranks `keeps`): the lowest-ranked left out (the rightmost first among
    equals) until the table fits `width`, or only the ones never left out remain; then any left
    out that fit in the room that made."""
    widths = [_width(cells, titles, i) for i in range(len(titles))]
    name_width = min(max(len("Module"), *(len(visible(n)) for n in names)), _name_room(width))
    kept = list(range(len(titles)))

    def total() -> int:
        return name_width + sum(widths[i] + 3 for i in kept)

    while total() > width:
        droppable = [i for i in kept if keeps[i] < ALWAYS]
        if not droppable:
            break
        kept.remove(min(droppable, key=lambda i: (keeps[i], -i)))
    # A wide column left out can leave room for narrower ones of lower rank: take them back,
    # the highest-ranked first, while the table still fits.
    for i in sorted(set(range(len(titles))) - set(kept), key=lambda i: -keeps[i]):
        if total() + widths[i] + 3 <= width:
            kept.append(i)
    return sorted(kept)


def _name_room(width: int) -> int:
    """How wide the Module column may stay while columns are left out: half the width, so that
    a deep tree's long names do not push every figure off the screen."""
    return max(MIN_NAME, width // 2)


def _format(header: list[str], body: list[list[str]], width: int | None) -> str:
    body = [[visible(cell) for cell in row] for row in body]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    if width is not None:
        others = sum(w + 3 for w in widths[1:])
        widths[0] = max(MIN_NAME, min(widths[0], width - others))
        body = [[_cut(row[0], widths[0]), *row[1:]] for row in body]
    lines = [_line(header, widths), "-|-".join("-" * w for w in widths)]
    lines += [_line(r, widths) for r in body]
    return "\n".join(line.rstrip() for line in lines)


def _cut(name: str, width: int) -> str:
    """A name too long for its column, cut in the middle: the tree and the leaf name show."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head) :]


def _line(cells: list[str], widths: list[int]) -> str:
    return " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))


__all__ = [
    "COLUMN_KEYS",
    "MODULE_ORDER",
    "SORT_KEYS",
    "FittedTable",
    "TableChoice",
    "check_choice",
    "chosen_columns",
    "fitted_table",
    "ordered_rows",
    "printed",
    "term_columns",
]
