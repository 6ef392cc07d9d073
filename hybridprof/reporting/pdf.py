"""The archival PDF: the same template in "pdf" mode (no script, limits stated), laid out by
weasyprint.

weasyprint needs Pango and HarfBuzz from the system; when they are missing its import raises
OSError, which becomes a ReportDependencyError with the one command that installs them.
"""

from __future__ import annotations

import importlib
from typing import Any

from hybridprof.datamodel import ProfileSession
from hybridprof.errors import ReportDependencyError
from hybridprof.reporting.context import PDF_MAX_ROWS, PDF_OP_LAYERS, build_context
from hybridprof.reporting.html import render_page

INSTALL_HINT = "apt-get install libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"


def load_weasyprint() -> Any:
    """Import weasyprint, turning a missing system library into a one-line, actionable error."""
    try:
        return importlib.import_module("weasyprint")
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReportDependencyError(
            f"PDF reports need system libraries weasyprint could not load ({first}); "
            f"install them with: {INSTALL_HINT}"
        ) from exc
    except ImportError as exc:
        raise ReportDependencyError(
            f"PDF reports need the weasyprint package ({exc}); "
            "install it with: pip install weasyprint"
        ) from exc


def render_pdf(
    session: ProfileSession, max_rows: int = PDF_MAX_ROWS, op_layers: int = PDF_OP_LAYERS
) -> bytes:
    weasyprint = load_weasyprint()
    page = render_page(build_context(session, "pdf", max_rows, op_layers))
    document = weasyprint.HTML(string=page, base_url=None)
    data: bytes = document.write_pdf()
    return data


class PdfRenderer:
    extensions = (".pdf",)
    binary = True

    def render(self, session: ProfileSession) -> bytes:
        return render_pdf(session)
