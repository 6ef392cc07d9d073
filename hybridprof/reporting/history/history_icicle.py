"""The differential icicle between two commits of a history: the module tree as the new commit
measured it, each block as wide as its subtree's self times summed, coloured by how the layer's
own time changed from the base commit (red slower, blue faster, the deeper the larger, pale
within the minimum change; grey for a parent with no time of its own), as CodSpeed's and Brendan
Gregg's differential flame graphs colour theirs.

Colour follows the layer's own time, not its subtree's: a parent whose child got slower keeps its
own colour, so the red lands on the layer that changed; and beyond what every layer moved by
between the two commits (the drift), so a busier machine at one of them colours nothing. The tree
is rebuilt from the paths (a parent nobody profiled is added, grey). The PDF gets this layout as
static SVG; the HTML page lays out the same blocks again in history.js for any two commits chosen
there (its test checks that both agree for the commits the page opens with).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from hybridprof.history.series import path_order
from hybridprof.reporting.format import format_time_us

WIDTH = 1000.0
ROW_H = 18.0
CHAR_W = 6.2
MIN_W = 0.6  # narrower blocks are left out of the static chart
SATURATED_PCT = 50.0  # a change this large or larger gets the deepest colour
# Two commits' values of a layer differ by noise alone with a spread of sqrt(2) x its noise: a
# change within twice that is coloured as none (pale), as one within the minimum change is.
NOISE_SPREADS = 2.0 * math.sqrt(2.0)
PALE, RED, BLUE, GREY = (242, 242, 242), (214, 39, 40), (31, 119, 180), "#c9ced6"


@dataclass(frozen=True, slots=True)
class DiffBlock:
    path: str
    depth: int
    x0: float  # in fractions of the new commit's total
    x1: float
    base_us: float | None  # the layer's own time at each commit (None: not measured there)
    new_us: float | None
    base_total_us: float  # its subtree's
    new_total_us: float
    color: str


def tree_of(paths: Sequence[str]) -> list[str]:
    """The paths with every missing ancestor added (and the root ""), parents before children,
    siblings in module order."""
    every = {""}
    for path in paths:
        parts = path.split(".") if path else []
        every.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return sorted(every, key=path_order)


def parent_of(path: str) -> str | None:
    return None if path == "" else path.rpartition(".")[0]


def color_of(
    base: float | None,
    new: float | None,
    min_change_pct: float,
    noise_pct: float | None = None,
    drift: float = 1.0,
) -> str:
    """The block's colour: its own time's change, beyond `drift` (how much every layer moved
    between the two commits: the machine's, not the layer's)."""
    if base is None or new is None or base <= 0:
        return GREY
    pct = 100.0 * (new / base / drift - 1.0)
    if abs(pct) < max(min_change_pct, NOISE_SPREADS * (noise_pct or 0.0)):
        return _hex(PALE)
    depth = min(abs(pct) / SATURATED_PCT, 1.0)
    target = RED if pct > 0 else BLUE
    return _hex(
        tuple(round(p + (t - p) * (0.25 + 0.75 * depth)) for p, t in zip(PALE, target, strict=True))
    )


def _hex(rgb: Sequence[int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in rgb)


def diff_icicle(
    paths: Sequence[str],
    base: Sequence[float],
    new: Sequence[float],
    min_change_pct: float,
    noise_pct: Sequence[float | None] = (),
    drift: float = 1.0,
) -> tuple[DiffBlock, ...]:
    """The blocks for two commits' self times of `paths` (NaN: not measured at that commit),
    coloured beyond the machine's `drift` between them, each layer's noise (`noise_pct`, per
    path) and the minimum change."""
    noise = dict(zip(paths, noise_pct, strict=False))
    own_base = {p: _value(v) for p, v in zip(paths, base, strict=True)}
    own_new = {p: _value(v) for p, v in zip(paths, new, strict=True)}
    nodes = tree_of(paths)
    children: dict[str | None, list[str]] = {}
    for node in nodes:
        children.setdefault(parent_of(node), []).append(node)
    base_total = _totals(nodes, children, own_base)
    new_total = _totals(nodes, children, own_new)
    whole = new_total[""]
    if whole <= 0:
        return ()
    return tuple(
        DiffBlock(
            path=node,
            depth=depth,
            x0=x / whole,
            x1=(x + new_total[node]) / whole,
            base_us=own_base.get(node),
            new_us=own_new.get(node),
            base_total_us=base_total[node],
            new_total_us=new_total[node],
            color=color_of(
                own_base.get(node), own_new.get(node), min_change_pct, noise.get(node), drift
            ),
        )
        for node, depth, x in _placed(children, new_total)
    )


def _totals(
    nodes: Sequence[str], children: dict[str | None, list[str]], own: dict[str, float | None]
) -> dict[str, float]:
    """Each node's subtree time: its own plus its children's (children come after parents)."""
    total: dict[str, float] = {}
    for node in reversed(nodes):
        total[node] = (own.get(node) or 0.0) + sum(total[k] for k in children.get(node, []))
    return total


def _placed(
    children: dict[str | None, list[str]], width: dict[str, float]
) -> Iterator[tuple[str, int, float]]:
    """(node, depth, left edge) of every node with width, depth first with a stack (a valid
    tree can be 1,000 deep), children side by side from their parent's left edge."""
    pending = [("", 0, 0.0)]
    while pending:
        node, depth, x = pending.pop()
        yield node, depth, x
        placed, left = [], x
        for child in children.get(node, []):
            if width[child] > 0:
                placed.append((child, depth + 1, left))
                left += width[child]
        pending.extend(reversed(placed))


def _value(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _label(name: str, width: float) -> str:
    fits = int((width - 6) / CHAR_W)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + "…"


def block_tip(block: DiffBlock) -> str:
    def time(v: float | None) -> str:
        return "-" if v is None else format_time_us(v)

    own = f"self {time(block.base_us)} → {time(block.new_us)}"
    if block.base_us and block.new_us is not None:
        own += f" ({100 * (block.new_us / block.base_us - 1):+.1f}%)"
    subtree = (
        f"subtree {format_time_us(block.base_total_us)} → {format_time_us(block.new_total_us)}"
    )
    return f"{block.path or '(root)'}: {own}; {subtree}"


def icicle_svg(blocks: Sequence[DiffBlock]) -> Markup:
    """The static chart (the PDF's, and the HTML page's until its script redraws it)."""
    parts = []
    for b in blocks:
        x, w = b.x0 * WIDTH, (b.x1 - b.x0) * WIDTH
        if w < MIN_W:
            continue
        y = b.depth * ROW_H
        name = b.path.rpartition(".")[2] or "(root)"
        label = _label(name, w)
        text = f'<text x="{x + 3:.1f}" y="{y + 12.5:.1f}">{escape(label)}</text>' if label else ""
        parts.append(
            f'<g><title>{escape(block_tip(b))}</title><rect x="{x:.1f}" y="{y:.1f}" '
            f'width="{max(w - 0.5, 0.3):.1f}" height="{ROW_H - 1:.0f}" fill="{b.color}"/>{text}</g>'
        )
    depth = 1 + max((b.depth for b in blocks), default=-1)
    height = max(depth, 1) * ROW_H
    return Markup(
        f'<svg class="chart icicle" id="icicle" role="img" viewBox="0 0 {WIDTH:.0f} {height:.0f}" '
        f'width="{WIDTH:.0f}" height="{height:.0f}" font-family="sans-serif" font-size="11">'
        + "".join(parts)
        + "</svg>"
    )


def pair_blocks(
    paths: Sequence[str],
    values: np.ndarray,
    pair: tuple[int, int],
    min_change_pct: float,
    noise_pct: Sequence[float | None] = (),
    drift: Sequence[float] = (),
) -> tuple[DiffBlock, ...]:
    """The blocks between the window's commits `pair` (column indices: base, new), coloured
    beyond the drift between them (`drift`: the window's per commit)."""
    base, new = list(values[:, pair[0]]), list(values[:, pair[1]])
    moved = drift[pair[1]] / drift[pair[0]] if drift else 1.0
    return diff_icicle(paths, base, new, min_change_pct, noise_pct, moved)


__all__ = [
    "DiffBlock",
    "block_tip",
    "color_of",
    "diff_icicle",
    "icicle_svg",
    "pair_blocks",
    "parent_of",
    "tree_of",
]
