"""Which rows of the layer table the page shows, and how its tree opens.

- The tree opens along the heavy path: from the top, each level's heaviest row (by its subtree's
  share of the iteration) is opened down to a leaf, and so is every ancestor of the heaviest
  layers by their own time, so the few rows that cost most are on screen when the page opens,
  wherever they sit; a small tree opens whole (`open_depth`). Rows stay in module order.
- The PDF and the notebook have a row budget (`heaviest_rows`): the heaviest profiled rows with
  their ancestors, in tree order, a `... N more` row where rows were left out (no holes in the
  tree), and a note saying what was left out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hybridprof.analysis.tree import CutRows, heaviest_with_ancestors, with_cuts

if TYPE_CHECKING:
    from hybridprof.reporting.page.tree_table import RowView

HEAVY_SHARE = 50.0  # % of the iteration: a level holding a row this heavy opens whole
OPEN_ROWS = 30  # the tree also opens a level while the rows shown stay this few
HEAVY_ROWS = 60  # ... and a heavy layer's parents while the rows shown stay this few
HEAVY_LAYERS = 20  # the heaviest layers by own time whose ancestors may be opened


def opened(rows: list[RowView]) -> list[RowView]:
    """`rows` with `collapsed` set: open above `open_depth`, and along the heavy paths."""
    depth = open_depth(rows)
    keep_open = heavy_paths(rows, {r.path for r in rows if r.has_children and r.depth < depth})
    return [
        replace(r, collapsed=True)  # only these change: a copy per row is slow at 16,000 rows
        if r.has_children and r.depth >= depth and r.path not in keep_open
        else r
        for r in rows
    ]


def open_depth(rows: list[RowView]) -> int:
    """How deep the tree opens whole: a level is opened while it holds a row with at least
    HEAVY_SHARE of the iteration (its parts are where the time goes) or while the rows shown stay
    within OPEN_ROWS; rows at the returned depth start collapsed (unless on a heavy path)."""
    deepest = max((r.depth for r in rows), default=0)
    depth = 0
    while depth < deepest:
        level = [r for r in rows if r.depth == depth and r.has_children]
        heavy = any(r.pct >= HEAVY_SHARE for r in level)
        shown = sum(1 for r in rows if r.depth <= depth + 1)
        if not heavy and shown > OPEN_ROWS:
            break
        depth += 1
    return depth


def heavy_paths(rows: list[RowView], already: set[str] | None = None) -> set[str]:
    """The rows to open so the heaviest layers show: from the top, each level's heaviest row
    down to a leaf; then the ancestors of the layers with the most own time (forward and
    backward), heaviest first, while the rows on screen stay within HEAVY_ROWS (`already` are
    open anyway)."""
    children: dict[str | None, list[RowView]] = {}
    for row in rows:
        children.setdefault(row.parent, []).append(row)
    by_path = {r.path: r for r in rows}
    keep: set[str] = set()
    level = children.get(None, [])
    while level:
        heaviest = max(level, key=lambda r: r.pct)
        if not heaviest.has_children or heaviest.pct <= 0:
            break
        keep.add(heaviest.path)
        level = children.get(heaviest.path, [])
    layers = [r for r in rows if r.profiled and not (r.derived or r.outside)]
    heavy = sorted(layers, key=lambda r: -(r.self_us + r.backward_us))[:HEAVY_LAYERS]
    base = (already or set()) | keep
    for layer in heavy:
        chain = _ancestors(layer, by_path) - base
        if not chain:
            continue
        if _shown(rows, base | chain) > HEAVY_ROWS and layer is not heavy[0]:
            break
        base |= chain
    return base - (already or set())


def _ancestors(row: RowView, by_path: dict[str, RowView]) -> set[str]:
    found: set[str] = set()
    parent = row.parent
    while parent is not None and parent in by_path:
        found.add(parent)
        parent = by_path[parent].parent
    return found


def _shown(rows: list[RowView], open_rows: set[str]) -> int:
    """How many rows show when exactly `open_rows` are open (a row shows when its parent shows
    and is open; the tree's roots always show)."""
    visible: set[str] = set()
    for row in rows:  # tree order: a parent before its children
        if row.parent is None or (row.parent in visible and row.parent in open_rows):
            visible.add(row.path)
    return len(visible)


def heaviest_rows(rows: list[RowView], limit: int) -> tuple[list[RowView], str]:
    """All rows if they fit; else the heaviest profiled rows (by total CPU) with their ancestors.

    A depth cut would keep mostly unprofiled containers (the selection is usually the leaves), so
    the PDF keeps what costs time instead, in tree order so it still reads as a tree.
    """
    if len(rows) <= limit:
        return rows, ""
    profiled = [r for r in rows if r.profiled]
    taken, kept = heaviest_with_ancestors(rows, profiled, _total_us, limit)
    layers = sum(1 for r in profiled if not (r.derived or r.outside))
    note = (
        f"The table shows the {len(taken)} heaviest of {layers} profiled layers by total CPU "
        f"time, with their parents ({len(kept)} of {len(rows)} rows; a '... N more' row stands "
        "where rows were left out); the HTML report has all of them."
    )
    return [
        _cut_view(x, rows[0]) if isinstance(x, CutRows) else x for x in with_cuts(rows, kept)
    ], note


def _cut_view(cut: CutRows, like: RowView) -> RowView:
    """The `... N more` row as the page places it: a row with nothing measured."""
    from hybridprof.reporting.page.tree_table import row_view

    layer = replace(
        like.layer, path=cut.path, name=cut.label, depth=cut.depth, parent=cut.parent,
        kind="unprofiled", has_children=False, class_name="", record=None,
        calls_per_iteration=None, self_cpu=None, total_cpu=None, backward_self_cpu_us=None,
        backward_total_cpu_us=None, self_device_us=None, total_device_us=None,
        self_cpu_mem=None, cpu_mem=None, self_device_mem=None, device_mem=None, own_us=0.0,
        share_us=0.0, pct_self=None, pct_total=None, param_count=0, input_shapes=(),
        output_shapes=(), aliases=(), source=None, op_count=0, roofline=None, work=None,
        memory=None, fused=(),
    )  # fmt: skip
    return row_view(layer, 0.0)


def _total_us(row: RowView) -> float:
    return row.total_us


__all__ = ["heaviest_rows", "heavy_paths", "open_depth", "opened"]
