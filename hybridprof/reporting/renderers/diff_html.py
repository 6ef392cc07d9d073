"""A comparison of two runs as a self-contained HTML page (see `reporting.page.diff_context`)."""

from __future__ import annotations

from hybridprof.diff import DiffResult
from hybridprof.reporting.page.diff_context import render_diff_page


def render_diff_html(diff: DiffResult) -> str:
    return render_diff_page(diff, "html")


class DiffHtmlRenderer:
    extensions = (".html", ".htm")
    binary = False

    def render(self, diff: DiffResult) -> str:
        return render_diff_html(diff)
