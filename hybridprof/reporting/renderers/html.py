"""The self-contained HTML report: one file, CSS and JS inlined, data as JSON, no network
(the page is `reporting.page.templates.render_page` of the "html" context)."""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_page


def render_html(session: ProfileSession) -> str:
    return render_page(build_context(session, "html"))


class HtmlRenderer:
    extensions = (".html", ".htm")
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_html(session)
