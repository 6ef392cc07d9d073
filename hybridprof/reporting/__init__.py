"""Reporters: a registry that picks a renderer by the output file's extension.

A renderer (after pyinstrument's) names its extensions, says whether it writes bytes, and turns a
`ProfileSession` into the file's content. Renderer modules import lazily: writing a CSV does not
import weasyprint, and the text renderer lives in `reporting/text.py`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hybridprof.compare import DiffResult
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import UsageError
from hybridprof.outputs import check_output_path, write_atomic


@runtime_checkable
class Renderer(Protocol):
    extensions: tuple[str, ...]
    binary: bool

    def render(self, session: ProfileSession) -> str | bytes: ...


class DiffRenderer(Protocol):
    extensions: tuple[str, ...]
    binary: bool

    def render(self, diff: DiffResult) -> str | bytes: ...


class TextRenderer:
    """torchprof-style text table with op rows, warnings and never-called paths."""

    extensions = (".txt",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        text = importlib.import_module("hybridprof.reporting.text")
        result: str = text.render_text_report(session)
        return result


# extension -> (module, class); modules are imported only when that format is written.
_REGISTRY: dict[str, tuple[str, str]] = {
    ".html": ("hybridprof.reporting.html", "HtmlRenderer"),
    ".htm": ("hybridprof.reporting.html", "HtmlRenderer"),
    ".pdf": ("hybridprof.reporting.pdf", "PdfRenderer"),
    ".txt": ("hybridprof.reporting", "TextRenderer"),
    ".csv": ("hybridprof.reporting.export", "CsvRenderer"),
    ".json": ("hybridprof.reporting.export", "JsonRenderer"),
}


# The comparison of two runs (`hybridprof diff`): extension -> (module, class).
_DIFF_REGISTRY: dict[str, tuple[str, str]] = {
    ".html": ("hybridprof.reporting.diff_html", "DiffHtmlRenderer"),
    ".htm": ("hybridprof.reporting.diff_html", "DiffHtmlRenderer"),
    ".pdf": ("hybridprof.reporting.diff_html", "DiffPdfRenderer"),
    ".txt": ("hybridprof.reporting.diff_export", "DiffTextRenderer"),
    ".csv": ("hybridprof.reporting.diff_export", "DiffCsvRenderer"),
    ".json": ("hybridprof.reporting.diff_export", "DiffJsonRenderer"),
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


def write_report(session: ProfileSession, path: str | Path, force: bool = False) -> Path:
    """Render `session` by the extension of `path` and write it atomically; returns the path."""
    renderer = renderer_for(path)
    check_output_path(path, force)  # before rendering: a PDF can take seconds
    return write_atomic(path, renderer.render(session), force)


def diff_extensions() -> tuple[str, ...]:
    return tuple(sorted(_DIFF_REGISTRY))


def diff_renderer_for(path: str | Path) -> DiffRenderer:
    """The comparison renderer for `path`'s extension; UsageError listing the known ones."""
    renderer: DiffRenderer = _renderer_from(_DIFF_REGISTRY, path, "diff report")
    return renderer


def write_diff_report(diff: DiffResult, path: str | Path, force: bool = False) -> Path:
    """Render a comparison by the extension of `path` and write it atomically."""
    renderer = diff_renderer_for(path)
    check_output_path(path, force)
    return write_atomic(path, renderer.render(diff), force)


__all__ = [
    "DiffRenderer",
    "Renderer",
    "TextRenderer",
    "diff_extensions",
    "diff_renderer_for",
    "known_extensions",
    "renderer_for",
    "write_diff_report",
    "write_report",
]
