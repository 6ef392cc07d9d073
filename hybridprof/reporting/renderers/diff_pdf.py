"""A comparison of two runs as the archival PDF: the diff page in "pdf" mode, laid out by
weasyprint."""

from __future__ import annotations

from hybridprof.diff import DiffResult
from hybridprof.reporting.page.diff_context import render_diff_page
from hybridprof.reporting.renderers.pdf import load_weasyprint


def render_diff_pdf(diff: DiffResult) -> bytes:
    page = render_diff_page(diff, "pdf")
    data: bytes = load_weasyprint().HTML(string=page, base_url=None).write_pdf()
    return data


class DiffPdfRenderer:
    extensions = (".pdf",)
    binary = True

    def render(self, diff: DiffResult) -> bytes:
        return render_diff_pdf(diff)
