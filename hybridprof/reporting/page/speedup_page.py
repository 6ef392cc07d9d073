"""The eager-vs-compiled report (`--compare-eager`'s compare.html): one page of its own, from the
same `SpeedupSummary` as the terminal's table and compare.json, so all three state the same
figures. Names are escaped by the template (autoescape); nothing is loaded from the network."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from hybridprof.diff.speedup import SpeedupRow, SpeedupSummary, Verdict
from hybridprof.reporting.format import format_time_us, installed_version
from hybridprof.reporting.page.templates import read_template, template_env
from hybridprof.reporting.text.speedup_text import (
    fused_text,
    headline_text,
    interval_text,
    speedup_text,
    threads_text,
)

SPEEDUP_TEMPLATE = "speedup.html.j2"
TOP = 10  # the faster and the slower layers listed above the table, biggest change first
_VERDICTS: tuple[Verdict, ...] = (
    "faster",
    "slower",
    "inconclusive",
    "within noise",
    "fused",
    "no figure",
)


@dataclass(frozen=True, slots=True)
class SpeedupRowView:
    """One row of the page's table, as text, with the keys its columns sort by."""

    order: int
    path: str
    depth: int
    eager: str
    eager_sort: float
    compiled: str
    compiled_sort: float
    speedup: str
    speedup_sort: float
    interval: str
    verdict: str
    verdict_text: str
    fused: str


def row_view(order: int, row: SpeedupRow) -> SpeedupRowView:
    return SpeedupRowView(
        order=order,
        path=row.path or "(root)",
        depth=row.depth,
        eager=_time(row.eager_us),
        eager_sort=row.eager_us or 0.0,
        compiled=_time(row.compiled_us),
        compiled_sort=row.compiled_us or 0.0,
        speedup="-" if row.fused_into is not None else speedup_text(row),  # the verdict says it
        speedup_sort=row.speedup or 0.0,
        interval=interval_text(row.interval),
        verdict=row.verdict,
        verdict_text=f"fused into {row.fused_into or '(root)'}" if row.fused_into is not None
        else row.verdict,
        fused=fused_text(row),
    )  # fmt: skip


def top_lines(summary: SpeedupSummary) -> list[tuple[str, list[str]]]:
    """The layers compiling made faster and slower, the biggest change first."""
    faster = sorted(summary.judged("faster"), key=lambda r: -(r.speedup or 0.0))
    slower = sorted(summary.judged("slower"), key=lambda r: r.speedup or 0.0)
    return [
        ("Faster compiled", [_line(r) for r in faster[:TOP]]),
        ("Slower compiled", [_line(r) for r in slower[:TOP]]),
    ]


def method_text(summary: SpeedupSummary) -> str:
    if summary.paired:
        return (
            f"Measured as a paired run in one process ({summary.pairs} pairs, ABBA order): each "
            "interval is the 95% order-statistic interval of the median of the per-pair ratios. "
            f"A layer is faster or slower when its whole interval lies beyond "
            f"{summary.threshold_pct:g}%; no run-wide shift is taken out."
        )
    return (
        "Two separate runs (unpaired): speed-ups are the ratio of the medians, with no interval; "
        "measure with --compare-eager for intervals."
    )


def render_speedup_html(summary: SpeedupSummary) -> str:
    template = template_env().get_template(SPEEDUP_TEMPLATE)
    counts = {v: len(summary.judged(v)) for v in _VERDICTS}
    return template.render(
        s=summary,
        version=installed_version(),
        headline=headline_text(summary).removeprefix("iteration (median): "),
        threads=threads_text(summary),
        counts=counts,
        tops=top_lines(summary),
        method=method_text(summary),
        rows=[row_view(i, row) for i, row in enumerate(summary.rows)],
        css=Markup(read_template("diff.css")),  # our own static files, not user data
        js=Markup(read_template("diff.js")),
    )


def _line(row: SpeedupRow) -> str:
    return (
        f"{row.path or '(root)'}: {speedup_text(row)} {interval_text(row.interval)} "
        f"({_time(row.eager_us)} -> {_time(row.compiled_us)})"
    )


def _time(us: float | None) -> str:
    return "-" if us is None else format_time_us(us)


class SpeedupHtmlRenderer:
    """The eager-vs-compiled comparison as a self-contained HTML page."""

    extensions = (".html", ".htm")
    binary = False

    def render(self, summary: SpeedupSummary) -> str:
        return render_speedup_html(summary)


__all__ = ["SpeedupHtmlRenderer", "render_speedup_html", "row_view"]
