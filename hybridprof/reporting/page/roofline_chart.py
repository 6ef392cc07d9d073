"""The roofline chart as inline SVG (drawn on the server, so the PDF shows it too).

Log-log: arithmetic intensity (FLOP/byte) across, achieved GFLOP/s up; the memory roof (peak GB/s
x intensity) rises to the ridge point and meets the flat compute roof (peak GFLOP/s). One dot per
timed layer with counted FLOPs, coloured by verdict; the heaviest layers are labelled. Every label
and tooltip goes through `markupsafe.escape` (module paths can hold any character).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from hybridprof.analysis.roofline import LayerRoofline
from hybridprof.datamodel import MachinePeak

WIDTH, HEIGHT = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 16, 44
LABELLED = 6
LABEL_CHARS = 26
CHAR_W = 6.2  # a character's width at font-size 11, for keeping labels apart
COLORS = {
    "compute": "#3b6ea8",
    "memory": "#d9822b",
    "overhead": "#8a94a0",
    "inconsistent": "#c0392b",  # above a roof: one of the numbers is wrong
}


@dataclass(frozen=True, slots=True)
class Dot:
    path: str
    intensity: float
    gflops: float
    verdict: str
    self_us: float
    labelled: bool


@dataclass(frozen=True, slots=True)
class _Scale:
    """Log axis: a value's pixel position between `lo` and `hi` (powers of ten)."""

    lo: float
    hi: float
    start: float
    end: float

    def at(self, value: float) -> float:
        span = math.log10(self.hi) - math.log10(self.lo)
        share = (math.log10(max(value, self.lo)) - math.log10(self.lo)) / span
        return self.start + share * (self.end - self.start)

    def decades(self) -> list[float]:
        return [10.0**k for k in range(round(math.log10(self.lo)), round(math.log10(self.hi)) + 1)]


def chart_dots(lines: Sequence[LayerRoofline]) -> tuple[Dot, ...]:
    """Layers that can be placed: timed, with FLOPs and bytes counted; the heaviest labelled."""
    placed = [
        x
        for x in lines
        if x.self_us and x.intensity and x.gflops and x.intensity > 0 and x.gflops > 0
    ]
    heaviest = {x.path for x in sorted(placed, key=lambda x: -(x.self_us or 0))[:LABELLED]}
    return tuple(
        Dot(x.path, x.intensity or 0, x.gflops or 0, x.verdict, x.self_us or 0, x.path in heaviest)
        for x in placed
    )


def _decade_range(values: Sequence[float]) -> tuple[float, float]:
    lo = 10.0 ** math.floor(math.log10(min(values)))
    hi = 10.0 ** math.ceil(math.log10(max(values)))
    return (lo, hi * 10) if hi <= lo else (lo, hi)


def _scales(dots: Sequence[Dot], peak: MachinePeak) -> tuple[_Scale, _Scale]:
    ridge = peak.gflops / peak.gbps
    xs = [d.intensity for d in dots] + [ridge / 10, ridge * 10]
    ys = [d.gflops for d in dots] + [peak.gflops * 1.5, peak.gflops / 1000]
    x_lo, x_hi = _decade_range(xs)
    y_lo, y_hi = _decade_range(ys)
    return (
        _Scale(x_lo, x_hi, LEFT, WIDTH - RIGHT),
        _Scale(y_lo, y_hi, HEIGHT - BOTTOM, TOP),
    )


def _tick(value: float) -> str:
    if value >= 1e3:
        return f"{value / 1e3:g}k" if value < 1e6 else f"{value / 1e6:g}M"
    return f"{value:g}"


def _axes(x: _Scale, y: _Scale) -> list[str]:
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#c3cad3"/>'
    ]
    for value in x.decades():
        px = x.at(value)
        parts.append(
            f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{HEIGHT - BOTTOM}" '
            'stroke="#eef0f3"/>'
            f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">'
            f"{_tick(value)}</text>"
        )
    for value in y.decades():
        py = y.at(value)
        parts.append(
            f'<line x1="{LEFT}" y1="{py:.1f}" x2="{WIDTH - RIGHT}" y2="{py:.1f}" stroke="#eef0f3"/>'
            f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{_tick(value)}</text>'
        )
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte)</text>"
        f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2:.0f})">achieved GFLOP/s</text>'
    )
    return parts


def _roof_points(x: _Scale, y: _Scale, peak: MachinePeak) -> list[tuple[float, float]]:
    """The roof in pixels: the memory slope up to the ridge, then the flat compute peak."""
    ridge = peak.gflops / peak.gbps
    start = max(x.lo, y.lo / peak.gbps)  # where the memory roof enters the plot
    points = [(start, start * peak.gbps), (ridge, peak.gflops), (x.hi, peak.gflops)]
    return [(x.at(a), y.at(b)) for a, b in points]


def _roof_labels(x: _Scale, y: _Scale, peak: MachinePeak) -> list[tuple[float, float, str, str]]:
    """The roof's own labels: (x, baseline y, anchor, text)."""
    ridge = peak.gflops / peak.gbps
    at_peak = y.at(peak.gflops)
    return [
        (WIDTH - RIGHT - 4, at_peak - 5, "end", f"peak {peak.gflops:.4g} GFLOP/s"),
        (x.at(ridge) - 6, at_peak + 14, "end", f"{peak.gbps:.4g} GB/s"),
    ]


def _roofs(x: _Scale, y: _Scale, peak: MachinePeak) -> list[str]:
    path = " ".join(f"{a:.1f},{b:.1f}" for a, b in _roof_points(x, y, peak))
    return [
        f'<polyline points="{path}" fill="none" stroke="#1d232b" stroke-width="1.5"/>',
        *(
            f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}">{escape(text)}</text>'
            for lx, ly, anchor, text in _roof_labels(x, y, peak)
        ),
    ]


def _color(verdict: str) -> str:
    kind = verdict.replace(":", "-").split("-", 1)[0]
    return COLORS.get(kind, COLORS["overhead"])


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else "…" + label[-(LABEL_CHARS - 1) :]


Box = tuple[float, float, float, float]  # left, top, right, bottom, in pixels


def text_box(x: float, baseline: float, text: str, anchor: str = "start") -> Box:
    """Where a label at font-size 11 is drawn (its width estimated per character)."""
    width = len(text) * CHAR_W
    left = x - width if anchor == "end" else x
    return (left, baseline - 10, left + width, baseline + 3)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(box: Box, line: Sequence[tuple[float, float]]) -> bool:
    """Whether the polyline passes through `box` (sampled every 2 px along each segment)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(line):
        steps = max(1, int(max(abs(x1 - x0), abs(y1 - y0)) / 2))
        for k in range(steps + 1):
            px, py = x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps
            if box[0] <= px <= box[2] and box[1] <= py <= box[3]:
                return True
    return False


def _label_places(dots: Sequence[Dot], x: _Scale, y: _Scale, peak: MachinePeak) -> dict[str, float]:
    """Label baselines (y) of the labelled dots, heaviest first, above the dot or else below it;
    a label that would cross the roof, its labels or a label already placed is left off (layers
    of one kind often sit on one spot, the busiest near the roof); the tooltip still names it."""
    roof = _roof_points(x, y, peak)
    taken = [text_box(lx, ly, text, anchor) for lx, ly, anchor, text in _roof_labels(x, y, peak)]
    placed: dict[str, float] = {}
    for dot in sorted((d for d in dots if d.labelled), key=lambda d: -d.self_us):
        px, py = x.at(dot.intensity), y.at(dot.gflops)
        for label_y in (py - 6, py + 14):
            box = text_box(px + 6, label_y, _short(dot.path or "(root)"))
            if not _crosses(box, roof) and not any(_overlaps(box, t) for t in taken):
                placed[dot.path] = label_y
                taken.append(box)
                break
    return placed


def _dot(dot: Dot, x: _Scale, y: _Scale, label_y: float | None) -> str:
    px, py = x.at(dot.intensity), y.at(dot.gflops)
    tip = escape(
        f"{dot.path or '(root)'}: {dot.verdict}; {dot.intensity:.3g} FLOP/byte, "
        f"{dot.gflops:.3g} GFLOP/s"
    )
    label = (
        f'<text x="{px + 6:.1f}" y="{label_y:.1f}">{escape(_short(dot.path or "(root)"))}</text>'
        if label_y is not None
        else ""
    )
    return (
        f'<g class="dot"><title>{tip}</title><circle cx="{px:.1f}" cy="{py:.1f}" r="4" '
        f'fill="{_color(dot.verdict)}" fill-opacity="0.8"/>{label}</g>'
    )


def render_roofline(lines: Sequence[LayerRoofline], peak: MachinePeak) -> Markup:
    """The chart's SVG; the caller says which layers were left off (see `chart_dots`)."""
    dots = chart_dots(lines)
    if peak.gflops <= 0 or peak.gbps <= 0:
        return Markup("")
    x, y = _scales(dots, peak)
    places = _label_places(dots, x, y, peak)
    body = "".join(
        [*_axes(x, y), *_roofs(x, y, peak), *(_dot(d, x, y, places.get(d.path)) for d in dots)]
    )
    return Markup(
        f'<svg class="chart roofline" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11">'
        f"<title>Roofline: achieved GFLOP/s against arithmetic intensity, one dot per layer"
        f"</title>{body}</svg>"
    )


__all__ = ["Dot", "chart_dots", "render_roofline", "text_box"]
