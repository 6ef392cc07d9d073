"""A session inline in a Jupyter notebook: the HTML report's interactive tree table, in an iframe.

The view is the HTML report itself (header, charts, the tree table with collapse, sort, filter,
depth and per-layer op tables, findings), rendered from the same template, in an `<iframe srcdoc>`:

- Scoped: the report's script and styles run inside the frame, so two outputs in one notebook
  (or the notebook's own page) never see each other's ids, styles or variables, and the report's
  script needs no change to live in a notebook. `sandbox="allow-scripts"` (no same-origin) keeps
  the frame's script away from the notebook page.
- Self-contained and offline: the report's own Content-Security-Policy (no network) travels with
  it, and nothing is loaded from anywhere.
- Bounded: a model of thousands of layers shows at most `max_rows` rows (the heaviest profiled
  layers with their parents, as the PDF does) and says so in a note; `write_report` has them all.

Sessions show this way once `hybridprof.reporting` is imported: it registers this view with the
data model (see `hybridprof.datamodel.views`); the facade imports it before it hands out a session.
"""

from __future__ import annotations

import html
from dataclasses import replace

from hybridprof.datamodel import ProfileSession

NOTEBOOK_MAX_ROWS = 200
FRAME_HEIGHT_PX = 600
# The frame is small: the table comes first (the report's order is header, charts, table, findings),
# under a one-line header; the charts, then every other section (memory, roofline, ranks, ops),
# then the findings follow it. Layout only, so the report's template
# and script serve both unchanged.
NOTEBOOK_CSS = (
    "<style>body { display: flex; flex-direction: column; max-width: none; padding: 0.4em 0.8em; }"
    " body > * { order: 3; } .report-head { order: 0; } #tree { order: 1; } #charts { order: 2; }"
    " #findings { order: 4; }"
    " .report-head h1 { font-size: 1.15em; } .report-head .meta { display: none; }"
    " #tree > h2 { display: none; }</style>"
)
WHOLE_REPORT = (
    "For every row: hybridprof.reporting.write_report(session, 'report.html'), "
    "or hybridprof report session.json -o report.html."
)


def session_html(session: ProfileSession, max_rows: int = NOTEBOOK_MAX_ROWS) -> str:
    """The notebook view of `session`: an iframe holding its HTML report (rows limited)."""
    page = notebook_page(session, max_rows)
    title = html.escape(f"hybridprof: {session.plan.root_class}", quote=True)
    return (
        f'<iframe class="hybridprof-view" title="{title}" sandbox="allow-scripts" '
        f'style="width: 100%; height: {FRAME_HEIGHT_PX}px; border: 1px solid #d5dbe3;" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


def notebook_page(session: ProfileSession, max_rows: int = NOTEBOOK_MAX_ROWS) -> str:
    """The report page the frame shows: at most `max_rows` table rows, with a note when cut."""
    from hybridprof.reporting.page.context import build_context
    from hybridprof.reporting.page.icicle import icicles
    from hybridprof.reporting.page.row_limits import heaviest_rows
    from hybridprof.reporting.page.templates import render_page

    ctx = build_context(session, "html")
    rows, note = heaviest_rows(list(ctx.rows), max_rows)
    if note:
        kept = {row.path for row in rows}
        ops = {path: op for path, op in ctx.data.get("ops", {}).items() if path in kept}
        ctx = replace(
            ctx,
            rows=tuple(rows),
            icicles=icicles(rows, session.backward),  # its blocks point at the rows kept
            notes=(*ctx.notes, note, WHOLE_REPORT),
            data={**ctx.data, "ops": ops},
            sources=tuple(s for s in ctx.sources if s.path in kept),
        )
    return render_page(ctx).replace("</head>", NOTEBOOK_CSS + "</head>", 1)


__all__ = ["NOTEBOOK_MAX_ROWS", "notebook_page", "session_html"]
