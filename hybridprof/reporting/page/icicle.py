"""The icicle chart: the module tree by time, so where the time goes is seen before it is read.

One chart per pass (forward; backward beside it when the run measured one). Each layer is a block
as wide as its subtree's time in that pass, its children below it, left to right in module order,
the rest of its width its own (self) time; the root spans the top. A subtree's time is its rows'
self medians summed, as the table's shares are: the median of a parent's own total can hold a
pause that no child's median does, and would draw the parent wider than what it is made of.

The look follows the icicle views of pyinstrument and speedscope: blocks labelled with the layer's
name where the name fits, coloured by layer class so the layers of one kind are seen together,
grey for a container or an unprofiled parent (no time of its own measured).

The layout is made here once, for both pages: the PDF gets it as a static inline SVG; the HTML
page gets the blocks as data ([row, depth, x0, x1, colour, time, share], x in fractions of the
pass) and its script draws them at the page's width and zooms into the block clicked
(`icicle.js`). Every name goes through `markupsafe.escape` (module names can hold any character).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from hybridprof.reporting.format import format_time_us
from hybridprof.reporting.page.tree_table import RowView

PALETTE = (
    "#f4a259", "#8cb369", "#5b8e7d", "#f2c14e", "#bc4b51", "#7fa7c9", "#c38d9e", "#e8a87c",
    "#9db4c0", "#d4b483",
)  # fmt: skip
GREY = "#c9ced6"  # containers and unprofiled parents: no own time measured
WIDTH = 1000.0  # the SVG's units across (the PDF scales it to the page)
ROW_H = 18.0
CHAR_W = 6.2  # an 11-unit sans-serif character, on average
MIN_W = 0.6  # narrower blocks are left out of the static chart


@dataclass(frozen=True, slots=True)
class Block:
    row: int  # the row's index in the page's layer table
    path: str
    name: str
    class_name: str
    depth: int
    x0: float  # where it starts and ends, in fractions of the pass's total
    x1: float
    us: float
    color: int  # index into PALETTE, -1 for grey


@dataclass(frozen=True, slots=True)
class Icicle:
    key: str  # "forward" or "backward"
    title: str
    total_us: float
    depth: int  # rows of blocks
    blocks: tuple[Block, ...]

    def svg(self) -> Markup:
        return render_svg(self)

    def data(self) -> dict[str, Any]:
        """For the page's script: compact arrays, x to a millionth of the pass."""
        return {
            "key": self.key,
            "title": self.title,
            "depth": self.depth,
            "blocks": [
                [
                    b.row,
                    b.depth,
                    round(b.x0, 6),
                    round(b.x1, 6),
                    b.color,
                    format_time_us(b.us),
                    f"{100 * (b.x1 - b.x0):.1f}%",
                ]
                for b in self.blocks
            ],
        }


def icicles(rows: Sequence[RowView], backward: bool) -> tuple[Icicle, ...]:
    """The forward chart, and the backward one beside it when the run measured a backward."""
    passes = [("forward", "Forward pass", _forward)]
    if backward:
        passes.append(("backward", "Backward pass", _backward))
    charts = tuple(_icicle(key, title, rows, value) for key, title, value in passes)
    return tuple(c for c in charts if c.blocks)


def _forward(row: RowView) -> float:
    return row.self_us if row.profiled and not row.derived else 0.0


def _backward(row: RowView) -> float:
    return row.backward_us if row.profiled and not row.derived else 0.0


def _icicle(key: str, title: str, rows: Sequence[RowView], own: Any) -> Icicle:
    tree = [(i, r) for i, r in enumerate(rows) if not r.outside]
    children: dict[str | None, list[int]] = {}
    for i, row in tree:
        children.setdefault(row.parent, []).append(i)
    width: dict[int, float] = {}
    for i, row in reversed(tree):  # children come after their parent: sum them first
        kids = sum(width.get(k, 0.0) for k in children.get(row.path, []))
        width[i] = max(float(own(row)), 0.0) + kids
    roots = children.get(None, [])
    total = sum(width.get(i, 0.0) for i in roots)
    blocks: list[Block] = []
    if total > 0:
        _place(roots, 0.0, total, rows, children, width, blocks)
    depth = 1 + max((b.depth for b in blocks), default=-1)
    shown = f"{title}: {format_time_us(total)}" if total > 0 else title
    return Icicle(key, shown, total, depth, tuple(blocks))


def _place(
    level: list[int],
    start: float,
    total: float,
    rows: Sequence[RowView],
    children: dict[str | None, list[int]],
    width: dict[int, float],
    blocks: list[Block],
) -> None:
    """Lay out each row's block after its parent's, children side by side from the parent's
    left edge; depth first with a stack, not recursion (a valid session can be 1,000 deep)."""
    pending: list[tuple[int, float]] = []  # (row index, left edge), the next on top
    pending.extend(reversed(list(_lefts(level, start, width))))
    while pending:
        i, x = pending.pop()
        w = width[i]
        row = rows[i]
        color = -1 if (row.derived or not row.profiled) else _color(row.class_name)
        blocks.append(
            Block(
                i,
                row.path,
                row.name,
                row.class_name,
                row.depth,
                x / total,
                (x + w) / total,
                w,
                color,
            )
        )
        pending.extend(reversed(list(_lefts(children.get(row.path, []), x, width))))


def _lefts(level: list[int], start: float, width: dict[int, float]) -> list[tuple[int, float]]:
    """The rows of one level that have width, each with its left edge."""
    placed, x = [], start
    for i in level:
        w = width.get(i, 0.0)
        if w > 0:
            placed.append((i, x))
            x += w
    return placed


def _color(class_name: str) -> int:
    return zlib.crc32(class_name.encode("utf-8")) % len(PALETTE)


def _label(name: str, width: float) -> str:
    """The name as far as it fits the block (cut with …), or nothing when under 3 characters do."""
    fits = int((width - 6) / CHAR_W)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + "…"


def render_svg(chart: Icicle) -> Markup:
    """The static chart (the PDF's): blocks under MIN_W units left out."""
    parts = []
    for b in chart.blocks:
        x, w = b.x0 * WIDTH, (b.x1 - b.x0) * WIDTH
        if w < MIN_W:
            continue
        y = b.depth * ROW_H
        fill = GREY if b.color < 0 else PALETTE[b.color]
        tip = escape(
            f"{b.path or '(root)'} ({b.class_name}): {format_time_us(b.us)}, "
            f"{100 * (b.x1 - b.x0):.1f}% of the pass"
        )
        label = _label(b.name or b.class_name, w)
        text = f'<text x="{x + 3:.1f}" y="{y + 12.5:.1f}">{escape(label)}</text>' if label else ""
        parts.append(
            f'<g><title>{tip}</title><rect x="{x:.1f}" y="{y:.1f}" width="{max(w - 0.5, 0.3):.1f}" '
            f'height="{ROW_H - 1:.0f}" fill="{fill}"/>{text}</g>'
        )
    height = chart.depth * ROW_H
    return Markup(
        f'<svg class="chart icicle" role="img" viewBox="0 0 {WIDTH:.0f} {height:.0f}" '
        f'width="{WIDTH:.0f}" height="{height:.0f}" font-family="sans-serif" font-size="11">'
        f"<title>{escape(chart.title)}</title>{''.join(parts)}</svg>"
    )


__all__ = ["GREY", "PALETTE", "Block", "Icicle", "icicles", "render_svg"]
