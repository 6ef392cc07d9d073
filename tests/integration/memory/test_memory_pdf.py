"""The memory section in the PDF report, checked as text and as page images: the timeline and the
bar chart are drawn (their colours are on the page), the tables hold the figures."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from pypdf import PdfReader

from hybridprof.reporting import write_report
from hybridprof.reporting.page.memory_chart import LIVE
from tests.memory_sessions import layer_memory_session


def colours(image: Path) -> set[tuple[int, int, int]]:
    from PIL import Image

    with Image.open(image) as opened:
        rgb = opened.convert("RGB")
        return {rgb.getpixel((x, y)) for x in range(rgb.width) for y in range(rgb.height)}


def near(colour: tuple[int, int, int], found: set[tuple[int, int, int]]) -> bool:
    return any(sum(abs(a - b) for a, b in zip(colour, c, strict=True)) < 40 for c in found)


def page_image(pdf: Path, index: int, folder: Path, dpi: int) -> Path:
    """Page `index` (0-based) of `pdf` as a PNG in `folder`, through pdftoppm."""
    subprocess.run(
        ["pdftoppm", "-png", "-r", str(dpi), "-f", str(index + 1), "-l", str(index + 1), str(pdf),
         str(folder / "page")],
        check=True,
    )  # fmt: skip
    return next(folder.glob("page*.png"))


def test_the_pdf_draws_the_memory_timeline_and_its_tables(tmp_path: Path) -> None:
    path = write_report(layer_memory_session(), tmp_path / "m.pdf")
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    pages = [page.extract_text() for page in reader.pages]
    text = "\n".join(pages)
    for needle in (
        "Memory: the step's peak and what each layer keeps",
        "in the backward of fc2 [AddmmBackward0]",
        "activations saved for backward",
        "Memory per layer",
        "-1.00 MB",  # the net change, signed
    ):
        assert needle in text, needle
    if shutil.which("pdftoppm") is None:
        pytest.skip("needs pdftoppm (poppler-utils) to look at the pages")
    first = next(i for i, t in enumerate(pages) if "Live bytes over one measured step" in t)
    image = page_image(path, first, tmp_path, dpi=60)
    found = colours(image)
    live = tuple(int(LIVE[i : i + 2], 16) for i in (1, 3, 5))
    assert near(live, found)  # the curve (and the bars, in the same blue)
    assert near((0xC0, 0x39, 0x2B), found)  # the peak's marker
    assert near((0x5A, 0x9E, 0x4B), found)  # the forward lanes


def test_the_pdf_timeline_is_drawn_wide_enough_to_read(tmp_path: Path) -> None:
    """At half the page (a two-chart figure's width) its lanes spanned a third of the page and its
    labels printed at about 4pt; it takes the page's width now."""
    if shutil.which("pdftoppm") is None:
        pytest.skip("needs pdftoppm (poppler-utils) to look at the pages")
    from PIL import Image

    path = write_report(layer_memory_session(), tmp_path / "m.pdf")
    pages = [page.extract_text() for page in PdfReader(io.BytesIO(path.read_bytes())).pages]
    first = next(i for i, t in enumerate(pages) if "Live bytes over one measured step" in t)
    with Image.open(page_image(path, first, tmp_path, dpi=40)) as opened:
        rgb = opened.convert("RGB")
    live = {tuple(int(LIVE[i : i + 2], 16) for i in (1, 3, 5))}
    # the curve (its legend swatch at the left): how much of the page's width the plot takes
    xs = [
        x for x in range(rgb.width) for y in range(rgb.height) if near(rgb.getpixel((x, y)), live)
    ]
    assert xs and (max(xs) - min(xs)) / rgb.width > 0.5, (min(xs), max(xs), rgb.width)
