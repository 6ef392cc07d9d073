"""Reporters: a registry that picks a renderer by the output file's extension.

A renderer (after pyinstrument's) names its extensions, says whether it writes bytes, and turns a
`ProfileSession` (or a `DiffResult`) into the file's content; each lives beside the code of its
format, and its module is imported only when that format is written (writing a CSV does not import
weasyprint). The floors, top down: this registry; `notebook.py` and `page/` (what the HTML and
PDF pages show, their renderers); `text/` (the printed and torchprof-style tables, the .txt report,
the diff and speed-up summaries, the memory, compile, plan and ranks words); then the ground:
`layer_columns.py` (every column of the layer table, once, from the figures of
`column_figures.py`), `dataframe.py` (the pandas tables and the CSV/JSON files), `diff_data.py`
(a comparison's CSV and JSON) and the shared formatting (`format.py`, `trust.py`, `findings.py`,
`csv_cells.py`). Importing this package plugs the notebook and DataFrame views into the data
model (`install_views`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.views import register_view
from hybridprof.diff import DiffResult
from hybridprof.diff.speedup import SpeedupResult, SpeedupSummary
from hybridprof.errors import UsageError
from hybridprof.files.outputs import check_output_path, write_atomic


@runtime_checkable
class Renderer(Protocol):
    extensions: tuple[str, ...]
    binary: bool

    def render(self, session: ProfileSession) -> str | bytes: ...


class DiffRenderer(Protocol):
    extensions: tuple[str, ...]
    binary: bool

    def render(self, diff: DiffResult) -> str | bytes: ...


# extension -> (module, class); modules are imported only when that format is written.
_REGISTRY: dict[str, tuple[str, str]] = {
    ".html": ("hybridprof.reporting.page.templates", "HtmlRenderer"),
    ".htm": ("hybridprof.reporting.page.templates", "HtmlRenderer"),
    ".pdf": ("hybridprof.reporting.page.pdf", "PdfRenderer"),
    ".txt": ("hybridprof.reporting.text.text_report", "TextRenderer"),
    ".csv": ("hybridprof.reporting.dataframe", "CsvRenderer"),
    ".json": ("hybridprof.reporting.dataframe", "JsonRenderer"),
}


# The comparison of two runs (`hybridprof diff`): extension -> (module, class).
_DIFF_REGISTRY: dict[str, tuple[str, str]] = {
    ".html": ("hybridprof.reporting.page.diff_context", "DiffHtmlRenderer"),
    ".htm": ("hybridprof.reporting.page.diff_context", "DiffHtmlRenderer"),
    ".pdf": ("hybridprof.reporting.page.pdf", "DiffPdfRenderer"),
    ".txt": ("hybridprof.reporting.text.diff_text", "DiffTextRenderer"),
    ".csv": ("hybridprof.reporting.diff_data", "DiffCsvRenderer"),
    ".json": ("hybridprof.reporting.diff_data", "DiffJsonRenderer"),
}


def known_extensions() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def renderer_for(path: str | Path) -> Renderer:
    """The renderer for `path`'s extension; UsageError listing the known ones otherwise."""
    renderer: Renderer = _renderer_from(_REGISTRY, path, "report")
    return renderer


def _renderer_from(registry: dict[str, tuple[str, str]], path: str | Path, what: str) -> Any:
    """The renderer `registry` names for `path`'s extension, its module imported on first use."""
    suffix = Path(path).suffix.lower()
    if suffix not in registry:
        known = ", ".join(sorted(registry))
        shown = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"{what} '{path}' has {shown}; use one of {known}")
    module_name, class_name = registry[suffix]
    return getattr(importlib.import_module(module_name), class_name)()


def write_report(
    session: ProfileSession,
    path: str | Path,
    force: bool = False,
    own: bool = False,
    replace_users: bool = False,
) -> Path:
    """Render `session` by the extension of `path` and write it atomically; returns the path.
    `own`: hybridprof chose the name (replaced only over a report hybridprof wrote, or with
    `replace_users` over any regular file)."""
    renderer = renderer_for(path)
    check_output_path(path, force, own=own, replace_users=replace_users)  # before rendering
    return write_atomic(path, renderer.render(session), force, own=own, replace_users=replace_users)


# The eager-vs-compiled comparison (`--compare-eager`): extension -> (module, class).
_SPEEDUP_REGISTRY: dict[str, tuple[str, str]] = {
    ".html": ("hybridprof.reporting.page.speedup_page", "SpeedupHtmlRenderer"),
    ".htm": ("hybridprof.reporting.page.speedup_page", "SpeedupHtmlRenderer"),
    ".json": ("hybridprof.reporting.speedup_data", "SpeedupJsonRenderer"),
    ".txt": ("hybridprof.reporting.text.speedup_text", "SpeedupTextRenderer"),
}


class SpeedupRenderer(Protocol):
    extensions: tuple[str, ...]
    binary: bool

    def render(self, summary: SpeedupSummary) -> str | bytes: ...


def speedup_renderer_for(path: str | Path) -> SpeedupRenderer:
    renderer: SpeedupRenderer = _renderer_from(_SPEEDUP_REGISTRY, path, "speed-up report")
    return renderer


def write_speedup_report(
    result: SpeedupResult | SpeedupSummary,
    path: str | Path,
    force: bool = False,
    own: bool = False,
) -> Path:
    """The eager-vs-compiled comparison (what `profile(..., compare_eager=True)` returns, or its
    summary) as .html, .json or .txt, written atomically (`own` as for `write_diff_report`)."""
    renderer = speedup_renderer_for(path)
    check_output_path(path, force, own=own)
    summary = result.summary() if isinstance(result, SpeedupResult) else result
    return write_atomic(path, renderer.render(summary), force, own=own)


def diff_extensions() -> tuple[str, ...]:
    return tuple(sorted(_DIFF_REGISTRY))


def diff_renderer_for(path: str | Path) -> DiffRenderer:
    """The comparison renderer for `path`'s extension; UsageError listing the known ones."""
    renderer: DiffRenderer = _renderer_from(_DIFF_REGISTRY, path, "diff report")
    return renderer


def write_diff_report(
    diff: DiffResult, path: str | Path, force: bool = False, own: bool = False
) -> Path:
    """Render a comparison by the extension of `path` and write it atomically (`own`: a name
    hybridprof picked, replaced only over a comparison it wrote, never through a link)."""
    renderer = diff_renderer_for(path)
    check_output_path(path, force, own=own)
    return write_atomic(path, renderer.render(diff), force, own=own)


def _dataframe_of(session: ProfileSession) -> Any:
    # pandas is imported only when a DataFrame is asked for
    frame: Callable[[ProfileSession], Any] = importlib.import_module(
        "hybridprof.reporting.dataframe"
    ).session_frame
    return frame(session)


def _text_of(session: ProfileSession) -> str:
    from hybridprof.reporting.text.text_table import render_text

    return render_text(session)


def install_views() -> None:
    """Show sessions as HTML in notebooks, print them as their tree table and give them
    `to_dataframe()` (idempotent)."""
    from hybridprof.reporting.notebook import session_html

    register_view("html", ProfileSession, session_html)
    register_view("dataframe", ProfileSession, _dataframe_of)
    register_view("text", ProfileSession, _text_of)


install_views()

__all__ = [
    "DiffRenderer",
    "Renderer",
    "SpeedupRenderer",
    "diff_extensions",
    "diff_renderer_for",
    "install_views",
    "known_extensions",
    "renderer_for",
    "speedup_renderer_for",
    "write_diff_report",
    "write_report",
    "write_speedup_report",
]
