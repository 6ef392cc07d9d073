"""The archival PDF: the same template in "pdf" mode (no script, limits stated), laid out by
weasyprint.

weasyprint needs Pango and HarfBuzz from the system; when they are missing its import raises
OSError, which becomes a ReportDependencyError with the one command that installs them.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from hybridprof.datamodel import ProfileSession
from hybridprof.diff import DiffResult
from hybridprof.errors import ReportDependencyError
from hybridprof.reporting.page.context import PDF_MAX_ROWS, PDF_OP_LAYERS, build_context
from hybridprof.reporting.page.diff_context import render_diff_page
from hybridprof.reporting.page.templates import render_page

INSTALL_HINT = "apt-get install libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"
SUBSET_PACKAGE = "libharfbuzz-subset0"  # optional: without it weasyprint embeds fonts slower


def load_weasyprint() -> Any:
    """Import weasyprint, turning a missing system library into a one-line, actionable error."""
    try:
        # Without HarfBuzz-Subset weasyprint warns at import (an error under -W error);
        # `missing_optional_libraries` says it to the user instead, in words they can act on.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "HarfBuzz-Subset", DeprecationWarning)
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


def missing_optional_libraries() -> tuple[str, ...]:
    """Debian packages weasyprint runs without but slower (it found no HarfBuzz-Subset library)."""
    load_weasyprint()
    ffi = importlib.import_module("weasyprint.text.ffi")
    return (SUBSET_PACKAGE,) if getattr(ffi, "harfbuzz_subset", True) is None else ()


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


def render_diff_pdf(diff: DiffResult) -> bytes:
    """A comparison of two runs as the archival PDF: the diff page in "pdf" mode."""
    page = render_diff_page(diff, "pdf")
    data: bytes = load_weasyprint().HTML(string=page, base_url=None).write_pdf()
    return data


class DiffPdfRenderer:
    extensions = (".pdf",)
    binary = True

    def render(self, diff: DiffResult) -> bytes:
        return render_diff_pdf(diff)
