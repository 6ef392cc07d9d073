"""A layer history as a self-contained HTML page, or as a PDF (weasyprint, no script).

Both show where the series comes from, the environment's steps over the drift chart, a small time
series per layer (the layers with change points first) and a differential icicle. The HTML page
holds every layer, a filter, a readout of the commit under the pointer and two lists that choose
the icicle's commits; its data travels as JSON in the page, its one script is allowed by its hash
(Content-Security-Policy), and nothing loads from the network. The PDF holds the changed layers
and the largest others (`PDF_QUIET_LAYERS`), and the icicle of the commits the page opens with.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from markupsafe import Markup

from hybridprof.history.overview import HistoryOverview, LayerHistory
from hybridprof.reporting.format import format_time_us, installed_version
from hybridprof.reporting.history.history_charts import drift_svg, series_svg
from hybridprof.reporting.history.history_icicle import icicle_svg, pair_blocks, tree_of
from hybridprof.reporting.history.history_text import busy_text, change_text, header_lines
from hybridprof.reporting.page.templates import script_hash, script_json, template_env

Mode = Literal["html", "pdf"]
TEMPLATE = "history.html.j2"
PDF_QUIET_LAYERS = 30  # layers without change points in the PDF, by share


@dataclass(frozen=True, slots=True)
class Panel:
    """One layer's chart and its lines."""

    path: str
    title: str
    svg: Markup
    figures: str  # latest time and share
    changes: tuple[str, ...]
    changed: bool


def default_pair(view: HistoryOverview) -> tuple[int, int]:
    """The icicle's commits when the page opens: the last commit before the newest change point
    and the newest commit; without change points, the window's first and last."""
    last = len(view.window.commits) - 1
    steps = [c.step for layer in view.changed() for c in layer.code_changes]
    if not steps:
        return 0, last
    return max(steps, key=lambda s: s.index).last_before, last


def _panel(layer: LayerHistory, view: HistoryOverview) -> Panel:
    latest = format_time_us(layer.latest_us) if layer.latest_us is not None else "-"
    share = f", {layer.share_pct:.1f}% of the iteration" if layer.share_pct is not None else ""
    noise = f", noise ±{layer.noise_pct:.1f}%" if layer.noise_pct is not None else ""
    return Panel(
        path=layer.path or "(root)",
        title=f"{layer.path or '(root)'} ({layer.class_name})",
        svg=series_svg(view.window.self_us[layer.row], layer.changes, view, layer.row),
        figures=f"latest {latest}{share}{noise}",
        changes=tuple(change_text(c, view.window) for c in reversed(layer.code_changes)),
        changed=bool(layer.code_changes),
    )


def _commit_label(view: HistoryOverview, index: int) -> str:
    point = view.window.commits[index]
    when = ""
    if point.committed_at:
        stamp = datetime.datetime.fromtimestamp(point.committed_at, datetime.timezone.utc)
        when = f" {stamp:%Y-%m-%d}"
    subject = f" {point.subject[:60]}" if point.subject else ""
    return f"{view.window.earlier + index + 1}: {point.short}{when}{subject}"


def build_context(view: HistoryOverview, mode: Mode) -> dict[str, Any]:
    layers = list(view.layers)
    left_out = 0
    if mode == "pdf":
        quiet = [x for x in layers if not x.code_changes]
        left_out = max(0, len(quiet) - PDF_QUIET_LAYERS)
        layers = list(view.changed()) + quiet[:PDF_QUIET_LAYERS]
    base, new = default_pair(view) if view.window.commits else (0, 0)
    window = view.window
    blocks = pair_blocks(
        window.paths, window.self_us, (base, new), view.min_change_pct, view.noise_pct, view.drift
    )
    labels = [_commit_label(view, i) for i in range(len(view.window.commits))]
    return {
        "mode": mode,
        "title": f"hybridprof history: {view.window.series.model}",
        "generator": f"hybridprof {installed_version()}",
        "header": header_lines(view),
        "environment": [f"{change_text(c, view.window)}" for c in view.environment],
        "busy": busy_text(view) if view.busy else "",
        "drift": drift_svg(view) if view.drift_known and view.window.commits else None,
        "panels": [_panel(layer, view) for layer in layers],
        "changed": len(view.changed()),
        "left_out": left_out,
        "icicle": icicle_svg(blocks),
        "pair": (labels[base], labels[new]) if labels else ("", ""),
        "commits": list(enumerate(labels)),
        "base": base,
        "new": new,
        "min_change": view.min_change_pct,
    }


def page_data(view: HistoryOverview, base: int, new: int) -> dict[str, Any]:
    """What the page's script reads: the commits, the tree and every layer's self times."""
    window = view.window
    row = {path: i for i, path in enumerate(window.paths)}
    tree = tree_of(window.paths)
    index = {path: i for i, path in enumerate(tree)}
    return {
        "earlier": window.earlier,
        "commits": [[c.short, c.subject[:80], c.sessions, c.noisy] for c in window.commits],
        "tree": [[p, index[p.rpartition(".")[0]] if p else -1, row.get(p, -1)] for p in tree],
        "values": [[_rounded(v) for v in values] for values in window.self_us],
        "noise": [_rounded(n) if n is not None else None for n in view.noise_pct],
        "drift": [round(d, 6) for d in view.drift],
        "min_change": view.min_change_pct,
        "pair": [base, new],
    }


def _rounded(value: float) -> float | None:
    return float(f"{value:.4g}") if np.isfinite(value) else None


@functools.cache
def _script() -> str:
    source = template_env().loader
    assert source is not None
    text, _, _ = source.get_source(template_env(), "history.js")
    return text


def _style() -> str:
    source = template_env().loader
    assert source is not None
    return source.get_source(template_env(), "history.css")[0]


def render_history_page(view: HistoryOverview, mode: Mode) -> str:
    ctx = build_context(view, mode)
    data = script_json(page_data(view, ctx["base"], ctx["new"])) if mode == "html" else ""
    script = _script()
    return (
        template_env()
        .get_template(TEMPLATE)
        .render(
            ctx=ctx,
            css=Markup(_style()),  # our own static files, not user data
            js=Markup(script),
            js_hash=script_hash(script),
            page_data=data,
        )
    )


def render_history_pdf(view: HistoryOverview) -> bytes:
    from hybridprof.reporting.page.pdf import load_weasyprint

    page = render_history_page(view, "pdf")
    data: bytes = load_weasyprint().HTML(string=page, base_url=None).write_pdf()
    return data


def write_history_report(view: HistoryOverview, path: Path, force: bool = False) -> Path:
    """The report by the extension of `path` (.html, .htm or .pdf), written atomically."""
    from hybridprof.files.outputs import check_output_path, write_atomic

    check_output_path(path, force)
    if path.suffix.lower() == ".pdf":
        return write_atomic(path, render_history_pdf(view), force)
    return write_atomic(path, render_history_page(view, "html"), force)


__all__ = [
    "PDF_QUIET_LAYERS",
    "build_context",
    "default_pair",
    "page_data",
    "render_history_page",
    "render_history_pdf",
    "write_history_report",
]
