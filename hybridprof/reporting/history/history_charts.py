"""A small time series per layer as inline SVG: its self time at each commit of the window, the
level of each stretch between change points, and the change points marked (red: slower, green:
faster, grey dashes: the environment's), each with the commit range and the change in its
tooltip. Drawn here once for both pages: the PDF shows them as they are, the HTML page adds a
readout of the commit under the pointer (history.js). Every name goes through `escape`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from markupsafe import Markup, escape

from hybridprof.history.overview import Change, HistoryOverview
from hybridprof.history.series import Window
from hybridprof.reporting.format import format_time_us
from hybridprof.reporting.history.history_text import pct_text

WIDTH, HEIGHT = 360.0, 64.0
PAD_X, PAD_TOP, PAD_BOTTOM = 4.0, 6.0, 6.0
MIN_SPAN = 0.10  # the y axis spans at least this share of the median: noise stays small
LINE = "#4a6fa5"
LEVEL = "#8a8a8a"
SLOWER, FASTER, ENVIRONMENT = "#c0392b", "#2e7d32", "#9e9e9e"


def x_of(index: float, commits: int) -> float:
    if commits <= 1:
        return WIDTH / 2
    return PAD_X + index * (WIDTH - 2 * PAD_X) / (commits - 1)


def _y_scale(values: np.ndarray) -> tuple[float, float]:
    """The lowest and highest value the axis shows."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return 0.0, 1.0
    low, high, middle = float(finite.min()), float(finite.max()), float(np.median(finite))
    span = max(high - low, MIN_SPAN * abs(middle), 1e-9)
    if high - low < span:
        low = middle - span / 2
        high = middle + span / 2
    pad = 0.05 * span
    return low - pad, high + pad


def _y(value: float, low: float, high: float) -> float:
    return PAD_TOP + (high - value) / (high - low) * (HEIGHT - PAD_TOP - PAD_BOTTOM)


def _polylines(values: np.ndarray, low: float, high: float) -> list[str]:
    """The measured points as lines, broken where a commit has no value."""
    runs: list[list[str]] = [[]]
    for i, value in enumerate(values):
        if not math.isfinite(value):
            runs.append([])
            continue
        runs[-1].append(f"{x_of(i, len(values)):.1f},{_y(float(value), low, high):.1f}")
    lines = []
    for run in runs:
        if len(run) == 1:
            x, y = run[0].split(",")
            lines.append(f'<circle cx="{x}" cy="{y}" r="1.5" fill="{LINE}"/>')
        elif run:
            lines.append(
                f'<polyline points="{" ".join(run)}" fill="none" stroke="{LINE}" '
                'stroke-width="1.2"/>'
            )
    return lines


def _levels(values: np.ndarray, starts_at: Sequence[int], low: float, high: float) -> list[str]:
    """The median level of each stretch between change points (its own and the environment's)."""
    starts = [0, *sorted(set(starts_at)), len(values)]
    parts = []
    for start, end in itertools.pairwise(starts):
        part = values[start:end]
        part = part[np.isfinite(part)]
        if end <= start or not len(part):
            continue
        y = _y(float(np.median(part)), low, high)
        x0, x1 = x_of(start, len(values)), x_of(end - 1, len(values))
        parts.append(
            f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{LEVEL}" '
            'stroke-width="1" stroke-dasharray="3 2"/>'
        )
    return parts


def marker(change: Change, window: Window, layer: bool = True) -> str:
    """A change point's line, between the last commit of the old level and the first of the new,
    with a wide invisible band under it that carries the tooltip."""
    step, commits = change.step, len(window.commits)
    x = (x_of(step.last_before, commits) + x_of(step.index, commits)) / 2
    env = step.environment or not layer
    color = ENVIRONMENT if env else (SLOWER if step.slower else FASTER)
    dash = ' stroke-dasharray="4 3"' if env else ""
    first = window.earlier + step.last_before + 1
    what = "environment" if env else ("slower" if step.slower else "faster")
    levels = ""
    if change.before_us is not None and change.after_us is not None:
        levels = f", {format_time_us(change.before_us)} → {format_time_us(change.after_us)}"
    tip = escape(
        f"{what} {pct_text(step)}: commits {first}-{window.earlier + step.index + 1}, "
        f"{change.before_rev[:10]}..{change.after_rev[:10]}{levels}"
    )
    return (
        f'<g class="change"><title>{tip}</title>'
        f'<rect x="{x - 5:.1f}" y="0" width="10" height="{HEIGHT:.0f}" fill="transparent"/>'
        f'<line x1="{x:.1f}" y1="1" x2="{x:.1f}" y2="{HEIGHT - 1:.0f}" stroke="{color}" '
        f'stroke-width="1.6"{dash}/></g>'
    )


def series_svg(
    values: np.ndarray, changes: Sequence[Change], view: HistoryOverview, row: int | None
) -> Markup:
    """One layer's chart (`row` None: the drift chart, whose change points are the
    environment's)."""
    window = view.window
    low, high = _y_scale(values)
    steps = [c.step.index for c in (*changes, *(view.environment if row is not None else ()))]
    parts = [*_levels(values, steps, low, high), *_polylines(values, low, high)]
    marks = [marker(c, window) for c in changes]
    if row is not None:
        marks += [marker(c, window, layer=False) for c in view.environment]
    label_top = _axis_label(high, row is None)
    label_bottom = _axis_label(low, row is None)
    data = f' data-row="{row}"' if row is not None else ' data-row="drift"'
    return Markup(
        f'<svg class="series" viewBox="0 0 {WIDTH:.0f} {HEIGHT:.0f}" width="{WIDTH:.0f}" '
        f'height="{HEIGHT:.0f}" role="img" font-family="sans-serif" font-size="9"{data}>'
        f'<rect x="0" y="0" width="{WIDTH:.0f}" height="{HEIGHT:.0f}" fill="#fbfbfb"/>'
        + "".join(parts)
        + "".join(marks)
        + f'<text x="{WIDTH - 2:.0f}" y="9" text-anchor="end" fill="#666">{label_top}</text>'
        + f'<text x="{WIDTH - 2:.0f}" y="{HEIGHT - 2:.0f}" text-anchor="end" fill="#666">'
        f"{label_bottom}</text></svg>"
    )


def _axis_label(value: float, ratio: bool) -> str:
    return f"×{value:.3f}" if ratio else format_time_us(max(value, 0.0))


def drift_svg(view: HistoryOverview) -> Markup:
    """The environment's factor per commit (every layer's common move), its steps marked."""
    return series_svg(np.array(view.drift, dtype=float), view.environment, view, None)


__all__ = ["HEIGHT", "WIDTH", "drift_svg", "marker", "series_svg", "x_of"]
