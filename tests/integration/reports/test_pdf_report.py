"""The PDF report: it opens, its text holds the layers and totals, metadata, escaping, limits, and a
clear error when weasyprint's system libraries are missing."""

from __future__ import annotations

import importlib.abc
import io
import re
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader

from hybridprof.errors import ReportDependencyError
from hybridprof.reporting import write_report
from hybridprof.reporting.page.pdf import INSTALL_HINT, load_weasyprint, render_pdf
from tests.report_page import page_rows
from tests.sessions import HOSTILE, big_session, hostile_session, nested_session


def _text(data: bytes) -> tuple[PdfReader, str]:
    reader = PdfReader(io.BytesIO(data))
    return reader, "\n".join(page.extract_text() for page in reader.pages)


def test_pdf_opens_and_holds_layers_totals_and_findings(tmp_path: Path) -> None:
    path = write_report(nested_session(), tmp_path / "report.pdf")
    reader, text = _text(path.read_bytes())
    assert len(reader.pages) >= 2
    for needle in (
        "blocks",
        "conv",
        "Conv2d",
        "340.000us",
        "1.000ms",
        "47.0%",
        "make_net",
        "Op breakdowns of the top layers",
        "aten::conv2d",
        "Parents whose own inline ops take time",
        "nets.py:44",
        "use_device",
        "Page 1 of",
    ):
        assert needle in text, needle


def test_pdf_metadata_and_running_header() -> None:
    reader, _ = _text(render_pdf(nested_session()))
    meta = reader.metadata
    assert meta is not None
    assert meta.title == "hybridprof report: Net (nets.py)"
    assert meta.creator == "hybridprof 0.1.0"
    assert meta.creation_date is not None and meta.creation_date.year == 2026
    first_page = reader.pages[0].extract_text()
    assert "Net (nets.py)" in first_page and "Profiled 2026-11-30" in first_page


def test_hostile_name_is_printed_as_text() -> None:
    _, text = _text(render_pdf(hostile_session()))
    assert HOSTILE in text
    assert "Evil</script><b>" in text


def test_big_session_pdf_is_limited_and_says_so() -> None:
    data = render_pdf(big_session(leaves=200), max_rows=60, op_layers=3)
    _, text = _text(data)
    flat = text.replace("\n", " ")
    assert "The table shows the 40 heaviest of 200 profiled layers by total CPU time" in flat
    # 54 rows and 6 '... N more' rows where the others were: the tree has no holes
    cut = [int(n) for n in re.findall(r"\.\.\. (\d+) more", flat)]
    assert len(cut) == 6 and sum(cut) + 54 == 242
    assert "top 3 of 200 layers" in flat
    assert "blocks.9.layers.6" in flat  # the heaviest leaf (101 us)
    assert "blocks.0.layers.0" not in flat  # the lightest (5 us) is cut


class _NoPango(importlib.abc.MetaPathFinder):
    """Behaves like a machine without Pango: importing weasyprint raises OSError (as cffi does)."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "weasyprint" or name.startswith("weasyprint."):
            raise OSError(
                "cannot load library 'libpango-1.0-0': "
                "libpango-1.0-0: cannot open shared object file"
            )


def test_missing_system_libraries_give_one_line_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [m for m in sys.modules if m == "weasyprint" or m.startswith("weasyprint.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoPango(), *sys.meta_path])
    with pytest.raises(ReportDependencyError) as info:
        load_weasyprint()
    message = str(info.value)
    assert "\n" not in message
    assert INSTALL_HINT in message and "libpango-1.0-0" in message
    with pytest.raises(ReportDependencyError):
        write_report(nested_session(), tmp_path / "r.pdf")
    assert list(tmp_path.iterdir()) == []


def test_real_profiled_session_renders_to_html_and_pdf(tmp_path: Path) -> None:
    import torch
    from torch import nn

    import hybridprof

    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), nn.Linear(8, 2)))
    session = hybridprof.profile(model, torch.randn(2, 8), warmup=1, iters=2)
    html = write_report(session, tmp_path / "r.html").read_text()
    assert {"0", "1", "1.0", "1.1"} <= set(page_rows(html))
    assert "aten::addmm" in html or "aten::linear" in html
    _, text = _text(write_report(session, tmp_path / "r.pdf").read_bytes())
    assert "Linear" in text and "ReLU" in text and "Sequential" in text
