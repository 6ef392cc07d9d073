"""What the HTML and PDF reports show of a `--flops` session: the roofline chart and table.

Plain, formatted data (templates only display it), built from `roofline.session_rooflines`.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from hybridprof.analysis.layer_table import stated_session
from hybridprof.analysis.roofline import (
    LayerRoofline,
    inconsistencies,
    session_rooflines,
    unattributed_flops,
)
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.format import format_count, format_rate, peak_text
from hybridprof.reporting.page.roofline_chart import chart_dots, render_roofline

# A model of thousands of layers: the table lists the heaviest (every layer has its FLOPs, GFLOP/s
# and verdict in the layer table); thousands of rows here made the HTML page take seconds to open.
MAX_ROWS = 100


@dataclass(frozen=True, slots=True)
class RooflineRow:
    path: str
    class_name: str
    profiled: bool
    flops: str
    bytes: str
    intensity: str
    gflops: str
    pct_peak: str
    verdict: str
    not_counted: str


@dataclass(frozen=True, slots=True)
class RooflineView:
    svg: Markup
    peak: str
    totals: str
    method: str
    notes: tuple[str, ...]
    rows: tuple[RooflineRow, ...]


def _row(line: LayerRoofline) -> RooflineRow:
    return RooflineRow(
        path=line.path or "(root)",
        class_name=line.class_name,
        profiled=line.self_us is not None,
        flops=format_count(line.flops, "FLOP"),
        bytes=format_count(line.bytes, "B"),
        intensity=format_rate(line.intensity, ""),
        gflops=format_rate(line.gflops, ""),
        pct_peak=format_rate(line.pct_peak, "%"),
        verdict=line.verdict if line.self_us is not None else "not profiled",
        not_counted=line.not_counted,
    )


def _totals(session: ProfileSession) -> str:
    work = session.flops
    assert work is not None
    text = (
        f"{format_count(work.forward_flops, 'FLOP')} and "
        f"{format_count(work.forward_bytes, 'B')} forward"
    )
    if session.backward:
        text += (
            f", {format_count(work.backward_flops, 'FLOP')} and "
            f"{format_count(work.backward_bytes, 'B')} backward"
        )
    outside = unattributed_flops(session)
    return text + (f"; {format_count(outside, 'FLOP')} outside the model" if outside else "")


def _heaviest(lines: list[LayerRoofline], limit: int) -> list[LayerRoofline]:
    """The `limit` lines with the most FLOPs, then bytes, in their own (tree) order."""
    if len(lines) <= limit:
        return lines
    ranked = sorted(range(len(lines)), key=lambda i: (-lines[i].flops, -lines[i].bytes, i))
    keep = set(ranked[:limit])
    return [x for i, x in enumerate(lines) if i in keep]


def roofline_view(session: ProfileSession) -> RooflineView | None:
    """None without --flops; else the chart, the peak, and one row per layer with work."""
    work = session.flops
    if work is None:
        return None
    lines = session_rooflines(stated_session(session))  # the table's times
    with_work = [x for x in lines if x.self_us is not None or x.flops or x.bytes or x.not_counted]
    shown = _heaviest(with_work, MAX_ROWS)
    placed = len(chart_dots(lines))
    timed = sum(1 for x in lines if x.self_us is not None)
    notes = [f"Inconsistent: {x.text}." for x in inconsistencies(stated_session(session))]
    if placed < timed:
        notes.append(
            f"{timed - placed} of {timed} profiled layers are not on the chart: no counted FLOPs "
            "(their verdict comes from bytes moved alone)"
        )
    if len(shown) < len(with_work):
        notes.append(
            f"The table shows the {len(shown)} of {len(with_work)} layers with the most FLOPs "
            "(then bytes); the layer table has every layer's FLOPs, GFLOP/s and verdict."
        )
    return RooflineView(
        svg=render_roofline(lines, work.peak),
        peak=peak_text(work.peak),
        totals=_totals(session),
        method=f"Counted in one extra pass ({work.pass_s:.2f} s) by a {work.method}.",
        notes=tuple(notes),
        rows=tuple(_row(x) for x in shown),
    )


__all__ = ["RooflineRow", "RooflineView", "roofline_view"]
