"""The icicle chart: the module tree by time, so where the time goes is seen before it is read.

One chart per pass (forward; backward beside it when the run measured one). Each layer is a block
as wide as its subtree's time in that pass, its children below it, left to right in module order,
the rest of its width its own (self) time; the root spans the top. A subtree's time is its rows'
self medians summed, as the table's shares are: the median of a parent's own total can hold a
pause that no child's median does, and would draw the parent wider than what it is made of.

The look follows the icicle views of pyinstrument and speedscope: blocks labelled with the layer's
name (and its time where that fits too), coloured by layer class so the layers of one kind are seen
together. Within one chart no two classes share a colour while the palette lasts (`class_colours`):
the common torch classes keep one colour in every chart, the others (a model's own Attention, MLP,
Block) take the colours left, heaviest first. A parent that runs code of its own is drawn lighter,
outlined in its colour, so it is told apart from the leaves; a container or an unprofiled parent
(no time of its own measured) is grey and dashed, and no class colour is grey. Every block's
tooltip gives its total, its self time and its share of the pass; the PDF, which has no
tooltips, has the time in the label where it fits.

The layout is made here once, for both pages: the PDF gets it as a static inline SVG; the HTML
page gets the blocks as data ([row, depth, x0, x1, colour, time, share, self time, kind], x in
fractions of the pass; kind 0 a leaf, 1 a parent with time of its own, -1 grey) and the palette;
its script draws them at the page's width and zooms into the block clicked
(`icicle.js`). Every name goes through `markupsafe.escape` (module names can hold any character).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from markupsafe import Markup, escape

from hybridprof.reporting.format import format_time_us
from hybridprof.reporting.page.tree_table import RowView

# 22 colours told apart at a glance (Trubetskoy's 20 distinct colours without grey, black and white,
# and three more); none is grey, the colour of a block with no time of its own.
PALETTE = (
    "#e6194b", "#3cb44b", "#ffe119", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6",
    "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324", "#fffac8", "#800000", "#aaffc3",
    "#808000", "#ffd8b1", "#000075", "#2f4f4f", "#dda0dd", "#b8860b",
)  # fmt: skip
DARK = frozenset({3, 5, 12, 14, 16, 18, 19})  # colours that take a white label
# The common torch classes keep their colour in every chart (the first 14 of the palette); the
# rest of the palette goes to the other classes of each chart.
FIXED_CLASSES = (
    "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "ReLU", "GELU", "Dropout", "Embedding",
    "MultiheadAttention", "Sequential", "Conv1d", "MaxPool2d", "SiLU", "Softmax",
)  # fmt: skip
FIXED = {name: i for i, name in enumerate(FIXED_CLASSES)}
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
    self_us: float = 0.0  # its own time in the pass (the rest of its width)
    parent: bool = False  # has children in the chart: drawn lighter, outlined

    @property
    def kind(self) -> int:
        """-1 grey (no time of its own), 1 a parent with time of its own, 0 a leaf."""
        return -1 if self.color < 0 else int(self.parent)

    def tip(self) -> str:
        """`blocks.0 (Block): total 1.2ms, self 40us, 12.0% of the pass`."""
        return (
            f"{self.path or '(root)'} ({self.class_name}): total {format_time_us(self.us)}, "
            f"self {format_time_us(self.self_us)}, {100 * (self.x1 - self.x0):.1f}% of the pass"
        )


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
            "palette": list(PALETTE),
            "dark": sorted(DARK),
            "blocks": [
                [
                    b.row,
                    b.depth,
                    round(b.x0, 6),
                    round(b.x1, 6),
                    b.color,
                    format_time_us(b.us),
                    f"{100 * (b.x1 - b.x0):.1f}%",
                    format_time_us(b.self_us),
                    b.kind,
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


def _optimizer(row: RowView) -> bool:
    return row.layer.kind in ("optimizer", "optimizer_part")


def _forward(row: RowView) -> float:
    return row.self_us if row.profiled and not row.derived else 0.0


def _backward(row: RowView) -> float:
    return row.backward_us if row.profiled and not row.derived else 0.0


def _icicle(key: str, title: str, rows: Sequence[RowView], own: Any) -> Icicle:
    # the module tree only: the optimizer's step runs in neither pass (its rows say its time)
    tree = [(i, r) for i, r in enumerate(rows) if not r.outside and not _optimizer(r)]
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
    blocks = _coloured(blocks, rows, own)
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
        color = -1 if (row.derived or not row.profiled) else 0  # the class's: `_coloured`
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


def class_colours(weights: dict[str, float]) -> dict[str, int]:
    """A palette index per class of one chart (`weights`: its classes, each with its time): a
    common torch class its fixed colour; the others, heaviest first, the colours no class of the
    chart has yet, so no two share one while the palette lasts (then they take turns)."""
    colours = {name: FIXED[name] for name in weights if name in FIXED}
    free = [i for i in range(len(PALETTE)) if i not in colours.values()]
    others = sorted((n for n in weights if n not in FIXED), key=lambda n: (-weights[n], n))
    for k, name in enumerate(others):
        colours[name] = free[k % len(free)] if free else k % len(PALETTE)
    return colours


def _coloured(blocks: list[Block], rows: Sequence[RowView], own: Any) -> list[Block]:
    """The blocks with their class's colour in this chart, their own time, and whether they are a
    parent (a block below them in the chart)."""
    weights: dict[str, float] = {}
    for b in blocks:
        if b.color >= 0:
            weights[b.class_name] = weights.get(b.class_name, 0.0) + b.us
    colours = class_colours(weights)
    parents = {rows[b.row].parent for b in blocks}
    return [
        replace(
            b,
            color=colours[b.class_name] if b.color >= 0 else -1,
            self_us=max(float(own(rows[b.row])), 0.0),
            parent=b.path in parents,
        )
        for b in blocks
    ]


def _label(name: str, width: float, time: str = "") -> str:
    """The name and `time` where both fit the block, else the name as far as it fits (cut with
    …), or nothing when under 3 characters do."""
    fits = int((width - 6) / CHAR_W)
    if fits < 3:
        return ""
    if time and len(name) + 1 + len(time) <= fits:
        return f"{name} {time}"
    return name if len(name) <= fits else name[: fits - 1] + "…"


def _fill(b: Block) -> str:
    """The block's look: grey and dashed without time of its own; a parent lighter, outlined."""
    if b.color < 0:
        return f'fill="{GREY}" stroke="#8a929c" stroke-dasharray="3 2" stroke-width="0.6"'
    colour = PALETTE[b.color]
    if b.parent:
        return f'fill="{colour}" fill-opacity="0.5" stroke="{colour}" stroke-width="1.2"'
    return f'fill="{colour}"'


def _text_class(b: Block) -> str:
    """A white label on a dark colour (the stylesheets' `text.on-dark`)."""
    return ' class="on-dark"' if b.color in DARK and not b.parent else ""


def render_svg(chart: Icicle) -> Markup:
    """The static chart (the PDF's): blocks under MIN_W units left out."""
    parts = []
    for b in chart.blocks:
        x, w = b.x0 * WIDTH, (b.x1 - b.x0) * WIDTH
        if w < MIN_W:
            continue
        y = b.depth * ROW_H
        label = _label(b.name or b.class_name, w, format_time_us(b.us))
        text = (
            f'<text x="{x + 3:.1f}" y="{y + 12.5:.1f}"{_text_class(b)}>{escape(label)}</text>'
            if label
            else ""
        )
        parts.append(
            f'<g><title>{escape(b.tip())}</title><rect x="{x:.1f}" y="{y:.1f}" '
            f'width="{max(w - 0.5, 0.3):.1f}" height="{ROW_H - 1:.0f}" {_fill(b)}/>{text}</g>'
        )
    height = chart.depth * ROW_H
    return Markup(
        f'<svg class="chart icicle" role="img" viewBox="0 0 {WIDTH:.0f} {height:.0f}" '
        f'width="{WIDTH:.0f}" height="{height:.0f}" font-family="sans-serif" font-size="11">'
        f"<title>{escape(chart.title)}</title>{''.join(parts)}</svg>"
    )


__all__ = ["FIXED", "GREY", "PALETTE", "Block", "Icicle", "class_colours", "icicles", "render_svg"]
