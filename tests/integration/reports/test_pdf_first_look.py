"""The PDF of a wide run (--backward --flops --profile-memory on a small transformer): every table
complete on its page (no column past the right edge: checked in the page images and the text),
paths wrapped only after a dot, and the icicle chart drawn."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pypdf import PdfReader

from hybridprof.analysis.roofline import session_rooflines
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting import write_report
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.icicle import WIDTH, _label
from hybridprof.reporting.page.tree_table import PDF_LINE_PT, _pdf_width, pdf_parts
from tests.wide_run import wide_session


@pytest.fixture(scope="module")
def session() -> ProfileSession:
    return wide_session()


@pytest.fixture(scope="module")
def pdf(session: ProfileSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(session, tmp_path_factory.mktemp("pdf") / "wide.pdf")


def text_of(pdf: Path) -> list[str]:
    return [page.extract_text() for page in PdfReader(io.BytesIO(pdf.read_bytes())).pages]


def test_the_layer_table_comes_in_parts_that_fit_the_page(session: ProfileSession) -> None:
    ctx = build_context(session, "pdf")
    columns = ctx.columns
    parts = pdf_parts(columns, ctx.rows)
    assert len(parts) >= 2  # too wide for one page
    assert all(part[0].key == "name" for part in parts)  # each led by the Layer column
    assert [c.key for part in parts for c in part[1:]] == [c.key for c in columns[1:]]
    for part in parts:
        assert sum(_pdf_width(c, ctx.rows) for c in part) <= PDF_LINE_PT


def test_every_column_and_every_verdict_is_on_a_page(pdf: Path, session: ProfileSession) -> None:
    text = "\n".join(text_of(pdf))
    for label in ("Self CPU", "Backward self", "Verdict", "Spread", "Params", "Output", "FLOPs"):
        assert label in text, label
    assert "Layers, continued:" in text
    words = set(text.split())
    for line in session_rooflines(session):
        if line.verdict:
            assert set(line.verdict.split()) <= words, line.verdict  # not cut mid-word


def test_paths_wrap_only_after_a_dot(pdf: Path, session: ProfileSession) -> None:
    # Each path of the roofline table is on the page whole, or split at one of its dots, never
    # inside a name (`bloc` / `ks.1`).
    tokens = set(" ".join(text_of(pdf)).split())
    for line in session_rooflines(session):
        path = line.path
        if not path:
            continue
        splits = [(path[: i + 1], path[i + 1 :]) for i, ch in enumerate(path) if ch == "."]
        whole = path in tokens
        at_dot = any(
            a in tokens and (b in tokens or any(t.startswith(b) for t in tokens)) for a, b in splits
        )
        assert whole or at_dot, path


def test_the_icicle_chart_is_drawn(pdf: Path, session: ProfileSession) -> None:
    first = text_of(pdf)[0]
    assert re.search(r"Forward pass: [\d.]+(us|ms|s)", first)
    assert re.search(r"Backward pass: [\d.]+(us|ms|s)", first)
    # the widest block below the root is labelled with its name (cut with … if need be)
    (forward, _) = build_context(session, "pdf").icicles
    widest = max((b for b in forward.blocks if b.depth > 0), key=lambda b: b.x1 - b.x0)
    label = _label(widest.name, (widest.x1 - widest.x0) * WIDTH)
    assert label and label in first, label


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="needs poppler-utils' pdftoppm")
def test_no_page_has_ink_past_its_right_margin(pdf: Path, tmp_path: Path) -> None:
    from PIL import Image

    subprocess.run(["pdftoppm", "-png", "-r", "40", str(pdf), str(tmp_path / "p")], check=True)
    pages = sorted(tmp_path.glob("p-*.png"))
    assert len(pages) >= 3
    for image_path in pages:
        image = Image.open(image_path).convert("L")
        width, height = image.size
        margin = int(width * 9 / 297)  # of the 12 mm margin, the outer 9 mm
        band = image.crop((width - margin, int(height * 0.08), width, int(height * 0.92)))
        assert band.getextrema()[0] > 200, image_path.name  # nothing dark: no cut column
