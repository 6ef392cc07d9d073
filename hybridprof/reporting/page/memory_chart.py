"""The memory timeline as inline SVG (drawn on the server, so the PDF shows it too).

Live bytes against time over one measured step: the curve (and on CUDA the caching allocator's
reserved bytes, dashed), the step's peak marked and labelled with where it was, and beneath it
the layer ranges, one lane per nesting depth (green forward, orange backward, purple the
optimizer). Every label and tooltip goes through `markupsafe.escape` (module paths can hold any
character).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from hybridprof.datamodel import MemoryTimeline, TimelineLane
from hybridprof.reporting.format import format_bytes
from hybridprof.reporting.page.charts import legend_row

WIDTH = 760
LEFT, RIGHT, TOP = 70, 16, 14
PLOT_H = 200
LANE_H = 13
LABEL_CHARS = 110
CHAR_W = 5.6  # a character's width at font-size 10, for keeping labels inside the plot
COLORS = {"forward": "#5a9e4b", "backward": "#d9822b", "optimizer": "#8e44ad"}
LIVE, RESERVED, PEAK = "#3b6ea8", "#8a94a0", "#c0392b"


@dataclass(frozen=True, slots=True)
class PeakMark:
    """Where the peak is drawn and what its label says."""

    time_us: float
    live_bytes: int
    label: str


@dataclass(frozen=True, slots=True)
class _Axes:
    end_us: float
    top: float  # bytes at the plot's top

    def x(self, us: float) -> float:
        span = self.end_us if self.end_us > 0 else 1.0
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max(us, 0.0), span) / span

    def y(self, nbytes: float) -> float:
        return TOP + PLOT_H * (1 - nbytes / self.top) if self.top > 0 else TOP + PLOT_H


def _short(label: str) -> str:
    """The label's head is the peak's size and where it was: cut its end (the tooltip has all)."""
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _line(points: Sequence[tuple[float, float]], axes: _Axes, color: str, dashed: bool) -> str:
    """A step line: live bytes hold their value until the next allocation or free."""
    steps: list[tuple[float, float]] = []
    for (t, v), (t_next, _) in zip(points, [*points[1:], points[-1]], strict=True):
        steps += [(t, v), (t_next, v)]
    drawn = " ".join(f"{axes.x(t):.1f},{axes.y(v):.1f}" for t, v in steps)
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{drawn}"/>'


def nice_ticks(top: float, unit: float = 1.0, count: int = 4) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten, in `unit`s) from 0 to `top`, about
    `count` of them."""
    if top <= 0:
        return [0.0]
    raw = top / unit / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw) * unit
    return [i * step for i in range(int(top // step) + 1)]


def _byte_unit(top: float) -> float:
    return next((u for u in (1024.0**3, 1024.0**2, 1024.0) if top >= 2 * u), 1.0)


def _grid(axes: _Axes) -> list[str]:
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{PLOT_H}" '
        'fill="none" stroke="#c3cad3"/>'
    ]
    unit = _byte_unit(axes.top)
    for value in nice_ticks(axes.top / 1.05, unit)[1:]:
        py = axes.y(value)
        text = format_bytes(value).replace(".00 ", " ")
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}" stroke="#eef0f3"/>'
            f'<text x="{LEFT - 4}" y="{py + 4:.1f}" text-anchor="end">{text}</text>'
        )
    for value in nice_ticks(axes.end_us, 1.0, 6):
        px = axes.x(value)
        parts.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{TOP + PLOT_H}" y2="{TOP + PLOT_H + 3}" '
            'stroke="#8a94a0"/>'
            f'<text x="{px:.1f}" y="{TOP + PLOT_H + 13}" text-anchor="middle">'
            f"{value / 1000:g} ms</text>"
        )
    return parts


def _peak(mark: PeakMark, axes: _Axes) -> str:
    """The marker, and its label centred over it as far as the plot lets it stay inside."""
    px, py = axes.x(mark.time_us), axes.y(mark.live_bytes)
    label = _short(mark.label)
    half = CHAR_W * len(label) / 2
    tx = min(max(px, LEFT + half), WIDTH - RIGHT - half)
    return (
        f'<g class="peak"><title>{escape(mark.label)}</title>'
        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{PEAK}"/>'
        f'<text x="{tx:.1f}" y="{max(py - 7, TOP + 10):.1f}" text-anchor="middle" '
        f'fill="{PEAK}">{escape(label)}</text></g>'
    )


def _lanes(lanes: Sequence[TimelineLane], axes: _Axes, top: float) -> tuple[list[str], float]:
    depth = max((lane.depth for lane in lanes if lane.phase != "optimizer"), default=0)
    parts = []
    for lane in lanes:
        row = depth + 1 if lane.phase == "optimizer" else lane.depth
        x0, x1 = axes.x(lane.start_us), axes.x(lane.end_us)
        y = top + row * LANE_H
        name = lane.path or "(root)"
        tip = escape(
            f"{lane.phase} of {name}: {lane.start_us / 1000:.3f}–{lane.end_us / 1000:.3f} ms"
        )
        label = ""
        if x1 - x0 > 6.5 * min(len(name), 24) + 4:
            label = (
                f'<text x="{x0 + 2:.1f}" y="{y + LANE_H - 4}" fill="#fff">'
                f"{escape(name if len(name) <= 24 else '…' + name[-23:])}</text>"
            )
        parts.append(
            f'<g><title>{tip}</title><rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 0.6):.1f}" '
            f'height="{LANE_H - 2}" fill="{COLORS.get(lane.phase, "#8a94a0")}" '
            f'fill-opacity="0.8"/>{label}</g>'
        )
    return parts, top + (depth + 2) * LANE_H


def _legend(y: float, reserved: bool) -> str:
    items = [("live bytes", LIVE), *((("reserved", RESERVED),) if reserved else ())]
    items += [("forward", COLORS["forward"]), ("backward", COLORS["backward"])]
    items += [("optimizer", COLORS["optimizer"]), ("peak", PEAK)]
    return legend_row(items, LEFT, y, char_w=CHAR_W)


def render_timeline(timeline: MemoryTimeline, peak: PeakMark) -> Markup:
    """The timeline's SVG."""
    times = timeline.time_us.values
    live = list(timeline.live_bytes)
    reserved = list(timeline.reserved_bytes) if timeline.reserved_bytes is not None else []
    end = max([timeline.end_us, *times, peak.time_us, *(lane.end_us for lane in timeline.lanes)])
    axes = _Axes(end, max([*live, *reserved, peak.live_bytes, 1]) * 1.1)
    parts = _grid(axes)
    if reserved:
        parts.append(_line(list(zip(times, reserved, strict=True)), axes, RESERVED, True))
    parts.append(_line(list(zip(times, live, strict=True)), axes, LIVE, False))
    parts.append(_peak(peak, axes))
    lane_parts, bottom = _lanes(timeline.lanes, axes, TOP + PLOT_H + 20)
    parts += lane_parts
    height = bottom + 18
    parts.append(_legend(bottom + 2, bool(reserved)))
    return Markup(
        f'<svg class="chart memory-timeline" role="img" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" font-family="sans-serif" font-size="10">'
        "<title>Live bytes over one step, the peak marked, the layers beneath</title>"
        f"{''.join(parts)}</svg>"
    )


__all__ = ["PeakMark", "render_timeline"]
