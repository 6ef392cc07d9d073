"""Horizontal bar charts as inline SVG, drawn on the server so the PDF (no JavaScript) shows them
too.

Labels are user-controlled (module paths can hold any character through `add_module`), so every
piece of text goes through `markupsafe.escape`; the result is `Markup` so the autoescaping template
inserts the SVG as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from hybridprof.analysis.layer_table import layer_table, stated_session
from hybridprof.datamodel import ModuleRecord, ProfileSession
from hybridprof.reporting.format import format_time_us

LABEL_W = 220
BAR_W = 330
VALUE_W = 90
ROW_H = 20
TOP = 8
LABEL_CHARS = 34
SERIES_COLORS = ("#3b6ea8", "#d9822b", "#5a9e4b")


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    values: tuple[float, ...]  # one per series, drawn side by side within the row


@dataclass(frozen=True, slots=True)
class Chart:
    """Plain chart data (tested directly) plus its rendered SVG."""

    key: str
    title: str
    series: tuple[str, ...]
    bars: tuple[Bar, ...]
    svg: Markup


def _short(label: str) -> str:
    # Keep the tail of a long dotted path: the leaf name tells more than the root prefix.
    return label if len(label) <= LABEL_CHARS else "…" + label[-(LABEL_CHARS - 1) :]


def _bar_rects(bar: Bar, y: float, scale: float) -> list[str]:
    height = (ROW_H - 6) / max(1, len(bar.values))
    parts = []
    for i, value in enumerate(bar.values):
        width = max(0.0, value * scale)
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        parts.append(
            f'<rect x="{LABEL_W}" y="{y + 3 + i * height:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" fill="{color}"/>'
        )
    return parts


def _row(bar: Bar, index: int, scale: float, fmt: Callable[[float], str]) -> str:
    y = TOP + index * ROW_H
    label, full = escape(_short(bar.label)), escape(bar.label)
    value = escape(" / ".join(fmt(v) for v in bar.values))
    text_y = y + ROW_H / 2 + 4
    return "".join(
        [
            f"<g><title>{full}: {value}</title>",
            f'<text x="{LABEL_W - 6}" y="{text_y:.1f}" text-anchor="end">{label}</text>',
            *_bar_rects(bar, y, scale),
            f'<text x="{LABEL_W + BAR_W + 6}" y="{text_y:.1f}">{value}</text></g>',
        ]
    )


def _legend(series: Sequence[str], y: float) -> str:
    if len(series) < 2:
        return ""
    colors = (SERIES_COLORS[i % len(SERIES_COLORS)] for i in range(len(series)))
    return legend_row(list(zip(series, colors, strict=False)), LABEL_W, y, char_w=6.2)


def legend_row(items: Sequence[tuple[str, str]], x: float, y: float, char_w: float) -> str:
    """Swatches with their labels in one row, each item as wide as its label (SVG text is not
    laid out: a fixed step let a long label run into the next swatch). `char_w`: a character's
    width at the chart's font size, rounded up."""
    parts = []
    for name, color in items:
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14:.1f}" y="{y + 9:.1f}">{escape(name)}</text>'
        )
        x += 14 + len(name) * char_w + 16
    return "".join(parts)


def render_svg(
    title: str, bars: Sequence[Bar], series: Sequence[str], fmt: Callable[[float], str]
) -> Markup:
    """An SVG of horizontal bars scaled to the largest value, with a legend for several series."""
    peak = max((v for b in bars for v in b.values), default=0.0)
    scale = BAR_W / peak if peak > 0 else 0.0
    legend_h = 18 if len(series) > 1 else 0
    height = TOP + len(bars) * ROW_H + legend_h + 4
    width = LABEL_W + BAR_W + VALUE_W + 40
    body = "".join(_row(b, i, scale, fmt) for i, b in enumerate(bars))
    return Markup(
        f'<svg class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>'
        f"{body}{_legend(series, TOP + len(bars) * ROW_H + 4)}</svg>"
    )


def make_chart(
    key: str,
    title: str,
    bars: Sequence[Bar],
    series: Sequence[str] = ("self CPU",),
    fmt: Callable[[float], str] = format_time_us,
) -> Chart:
    return Chart(key, title, tuple(series), tuple(bars), render_svg(title, bars, series, fmt))


TOP_LAYERS = 12


def top_layers_chart(session: ProfileSession, n: int = TOP_LAYERS) -> Chart:
    ranked = sorted(session.records, key=lambda r: -r.self_cpu_us.median)[:n]
    bars = [Bar(r.path or session.plan.root_class, (r.self_cpu_us.median,)) for r in ranked]
    return make_chart("top_layers", f"Top {len(bars)} layers by self CPU time", bars)


def class_chart(session: ProfileSession, n: int = TOP_LAYERS) -> Chart:
    totals: dict[str, float] = {}
    for r in session.records:
        totals[r.class_name] = totals.get(r.class_name, 0.0) + r.self_cpu_us.median
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:n]
    bars = [Bar(name, (value,)) for name, value in ranked]
    return make_chart("by_class", "Self CPU time by layer type", bars)


def backward_chart(session: ProfileSession, n: int = TOP_LAYERS) -> Chart:
    def both(r: ModuleRecord) -> tuple[float, float]:
        bwd = r.backward_self_cpu_us.median if r.backward_self_cpu_us else 0.0
        return (r.self_cpu_us.median, bwd)

    ranked = sorted(session.records, key=lambda r: -sum(both(r)))[:n]
    bars = [Bar(r.path or session.plan.root_class, both(r)) for r in ranked]
    return make_chart(
        "forward_backward", "Forward vs backward self CPU time", bars, ("forward", "backward")
    )


def step_chart(session: ProfileSession) -> Chart:
    """Where a training step goes: the layers' forward and backward, the optimizer, the rest,
    as the table's rows own them (so the bars add up to the table's headline)."""
    table = layer_table(session)
    forward = sum(r.self_cpu.median for r in table.layers() if r.self_cpu)
    backward = sum(r.backward_self_cpu_us or 0.0 for r in table.layers())
    bars = [Bar("layers, forward", (forward,)), Bar("layers, backward", (backward,))]
    optimizer = table.optimizer()
    if optimizer:
        bars.append(Bar("(optimizer)", (optimizer[0].share_us,)))
    outside = table.outside()
    if outside is not None:
        bars.append(Bar(outside.name, (outside.own_us,)))
    figures = "medians" if table.typical_steps is None else "means over the typical steps"
    return make_chart("step", f"Where the step goes (self CPU time, {figures})", bars)


def session_charts(session: ProfileSession) -> tuple[Chart, ...]:
    """Top layers and time by class always; forward vs backward when the session measured
    backward; where the step goes when it trained. The bars are the table's figures (with the
    profiler's cost out where the table takes it out)."""
    stated = stated_session(session)
    charts = [top_layers_chart(stated), class_chart(stated)]
    if session.backward:
        charts.append(backward_chart(stated))
    if session.backward or session.optimizer is not None:
        charts.append(step_chart(session))
    return tuple(charts)
