"""A comparison of two runs as a self-contained HTML page (sortable, filterable, changed layers
first, an inline-SVG chart of the biggest deltas) and as the archival PDF (a one-page summary,
then the table; both runs' identities in every page's header and footer).

Every name goes through the template's autoescape or `html.escape`; nothing loads from the network
(the page's Content-Security-Policy forbids it).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Literal

from markupsafe import Markup

from hybridprof.diff import Change, DiffResult, LayerDiff
from hybridprof.reporting.format import format_bytes, format_time_us
from hybridprof.reporting.page.templates import template_env
from hybridprof.reporting.text.diff_text import (
    KNOCK_ON_NOTE,
    QUANTITY_TITLES,
    change_text,
    floor_line,
    gate_lines,
    interval_text,
    layer_title,
    own_work_text,
    pairing_line,
    shift_lines,
    signed_pct,
    signed_time,
    verdict_label,
    with_own_work,
)

DIFF_TEMPLATE = "diff.html.j2"
CHART_BARS = 15
PDF_QUIET_ROWS = 200  # layers within noise shown in the PDF (every changed layer always is)
Mode = Literal["html", "pdf"]


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    sort: float  # the value a click on the column sorts by


@dataclass(frozen=True, slots=True)
class Row:
    title: str
    path: str
    class_name: str
    match: str
    verdict: str
    cells: tuple[Cell, ...]
    ops: tuple[str, ...]
    css_class: str  # v-slower, v-within-noise, ... (+ knock-on)
    own_work: str = ""  # what of its own work changed, or that none did ("": not compared)


COLUMNS = (
    ("self_cpu_us", "Self CPU"),
    ("total_cpu_us", "Total CPU"),
    ("backward_self_cpu_us", "Backward self"),
    ("self_device_us", "Self device"),
)


def _cell(change: Change | None) -> Cell:
    if change is None:
        return Cell("-", 0.0)
    base = "-" if change.base is None else format_time_us(change.base)
    new = "-" if change.new is None else format_time_us(change.new)
    text = f"{base} → {new} ({signed_time(change.delta)}, {signed_pct(change)})"
    return Cell(text, change.delta)


def _row(layer: LayerDiff, columns: tuple[tuple[str, str], ...]) -> Row:
    memory = layer.change("cpu_mem") or layer.change("device_mem")
    cells = [_cell(layer.change(q)) for q, _ in columns]
    if memory is not None:
        cells.append(Cell(format_bytes(memory.delta), memory.delta))
    else:
        cells.append(Cell("-", 0.0))
    ops = tuple(
        f"{op.name}{' (backward)' if op.backward else ''}: {format_time_us(op.base_us)} "
        f"x{op.base_calls} → {format_time_us(op.new_us)} x{op.new_calls} ({op.status})"
        for op in layer.ops
        if op.status != "same"
    )
    return Row(
        layer_title(layer),
        layer.path,
        layer.class_name,
        layer.match,
        verdict_label(layer),
        tuple(cells),
        ops,
        f"v-{layer.verdict.replace(' ', '-')}" + (" knock-on" if layer.knock_on else ""),
        own_work_text(layer) if layer.verdict != "within noise" else "",
    )


def delta_chart(diff: DiffResult, n: int = CHART_BARS) -> Markup:
    """Bars of the biggest self-time deltas beyond the run-wide shift, coloured by verdict (red:
    slower, green: faster, grey: within noise or knock-on); names escaped."""
    layers = sorted(diff.layers, key=lambda x: -abs(x.self_delta_beyond_shift()))[:n]
    layers = [x for x in layers if x.self_delta_beyond_shift() != 0]
    if not layers:
        return Markup("<p class='muted'>no self-time change to chart</p>")
    biggest = max(abs(x.self_delta_beyond_shift()) for x in layers)
    label_w, half, row_h = 260, 230, 20
    width, height = label_w + 2 * half + 90, row_h * len(layers) + 10
    middle = label_w + half
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>Biggest self-time changes</title>',
        f'<line x1="{middle}" y1="0" x2="{middle}" y2="{height}" stroke="#888"/>',
    ]
    for index, layer in enumerate(layers):
        delta = layer.self_delta_beyond_shift()
        y = 5 + index * row_h
        length = half * abs(delta) / biggest
        x = middle if delta > 0 else middle - length
        color = _BAR_COLOURS.get("knock-on" if layer.knock_on else layer.verdict, "#9e9e9e")
        name = html.escape(_short(layer.path or "(root)"))
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" font-size="11">{name}</text>'
            f'<rect x="{x:.1f}" y="{y + 2}" width="{max(length, 1):.1f}" height="{row_h - 6}" '
            f'fill="{color}"><title>{html.escape(layer_title(layer))}: '
            f"{html.escape(signed_time(delta))}</title></rect>"
            f'<text x="{middle + half + 6}" y="{y + 13}" font-size="11">'
            f"{html.escape(signed_time(delta))}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


_BAR_COLOURS = {
    "slower": "#c0392b",
    "faster": "#2e7d32",
    "added": "#c0392b",
    "removed": "#2e7d32",
    "inconclusive": "#b7791f",
}


def _short(label: str, width: int = 38) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1) :]


def build_diff_context(diff: DiffResult, mode: Mode) -> dict[str, Any]:
    """What the diff page shows; in "pdf" mode the layers within noise are limited."""
    columns = tuple(c for c in COLUMNS if any(x.change(c[0]) for x in diff.layers))
    layers, left_out = _shown_layers(diff, mode)
    return {
        "mode": mode,
        "diff": diff,
        "title": f"hybridprof diff: {diff.base.label} → {diff.new.label}",
        "identities": (("Base", diff.base), ("New", diff.new)),
        "total": change_text(diff.total),
        "total_interval": interval_text(diff.total),
        "columns": columns,
        "rows": [_row(x, columns) for x in layers],
        "left_out": left_out,
        "tops": _tops(diff),
        "chart": delta_chart(diff),
        "chart_caption": (
            "Biggest self CPU time changes"
            + (" beyond the run-wide shift" if diff.shift("self_cpu_us") else "")
            + " (red: slower, green: faster, amber: inconclusive, grey: within noise or knock-on)"
        ),
        "quantities": QUANTITY_TITLES,
        "shift_lines": shift_lines(diff),
        "method_lines": [line for line in (floor_line(diff), pairing_line(diff)) if line],
        "gate": gate_lines(diff),
        "gate_answer": diff.gate.answer if diff.gate is not None else "",
        "matched": [
            f"{layer_title(x)}: {verdict_label(x)}"
            for x in diff.layers
            if x.match not in ("path", "added", "removed")
        ],
        "knock_on_note": KNOCK_ON_NOTE if diff.knock_ons() else "",
        "counts": _counts(diff),
    }


def _shown_layers(diff: DiffResult, mode: Mode) -> tuple[list[LayerDiff], int]:
    """The layers the page lists, and how many within noise the PDF left out."""
    layers = list(diff.layers)
    if mode != "pdf":
        return layers, 0
    quiet = [x for x in layers if x.verdict == "within noise"]
    shown = [x for x in layers if x.verdict != "within noise"] + quiet[:PDF_QUIET_ROWS]
    return shown, max(0, len(quiet) - PDF_QUIET_ROWS)


def _tops(diff: DiffResult) -> list[tuple[str, list[str]]]:
    """The summary's lists: the first five layers of each verdict, with their change."""
    groups = (
        ("Slower", diff.regressions()),
        ("Inconclusive (interval wider than the threshold)", diff.undecided()),
        ("Faster", diff.improvements()),
        ("Knock-on (own work unchanged)", diff.knock_ons()),
    )
    return [
        (
            title,
            [
                with_own_work(f"{layer_title(x)}: {change_text(c)}", x)
                for x in group[:5]
                if (c := x.change("self_cpu_us")) is not None
            ],
        )
        for title, group in groups
    ]


_COUNTED = ("slower", "inconclusive", "faster", "added", "removed", "unknown", "within noise")


def _counts(diff: DiffResult) -> dict[str, int]:
    """Layers per verdict (a knock-on counted apart from its verdict)."""
    counts = {v: sum(1 for x in diff.layers if x.verdict == v and not x.knock_on) for v in _COUNTED}
    return counts | {"knock-on": len(diff.knock_ons())}


def render_diff_page(diff: DiffResult, mode: Mode) -> str:
    template = template_env().get_template(DIFF_TEMPLATE)
    return template.render(
        ctx=build_diff_context(diff, mode), css=_asset("diff.css"), js=_asset("diff.js")
    )


def _asset(name: str) -> Markup:
    from hybridprof.reporting.page.templates import _read_template

    return Markup(_read_template(name))  # our own static file, not user data


def render_diff_html(diff: DiffResult) -> str:
    return render_diff_page(diff, "html")


class DiffHtmlRenderer:
    """A comparison of two runs as a self-contained HTML page."""

    extensions = (".html", ".htm")
    binary = False

    def render(self, diff: DiffResult) -> str:
        return render_diff_html(diff)
