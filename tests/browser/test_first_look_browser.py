"""The HTML report of a wide run, at 1,400 px in headless Chromium: the page never scrolls
sideways (the layer table scrolls in its box, its first column stays), rows in module order with
the heavy layers on screen, and the icicle chart zooms into the block clicked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting import write_report
from tests.browser.chromium import NEEDS_CHROMIUM, launch
from tests.browser.test_html_browser import Opened
from tests.wide_run import wide_session

pytestmark = [
    pytest.mark.browser,
    NEEDS_CHROMIUM,
]


@pytest.fixture(scope="module")
def session() -> ProfileSession:
    return wide_session()


@pytest.fixture(scope="module")
def report(session: ProfileSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(session, tmp_path_factory.mktemp("wide") / "wide.html")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def opened(browser: Any, report: Path) -> Iterator[Opened]:
    page = Opened(browser, report)
    page.page.set_viewport_size({"width": 1400, "height": 900})
    yield page
    page.page.close()


def test_the_page_fits_1400_px_and_the_table_scrolls_in_its_box(opened: Opened) -> None:
    page = opened.page
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    box = page.locator("#layers-scroll")
    wide, shown = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
    assert wide > shown  # the table is wider than the page: it scrolls inside its box
    first = page.locator("#layers tr.row td.name").first
    before = first.bounding_box()
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    page.wait_for_timeout(50)
    after = first.bounding_box()
    assert before is not None and after is not None and after["x"] == before["x"]  # sticky
    verdict = page.locator("#layers thead th", has_text="Verdict")
    verdict_box, box_box = verdict.bounding_box(), box.bounding_box()
    assert verdict_box is not None and box_box is not None
    assert verdict_box["x"] + verdict_box["width"] <= box_box["x"] + box_box["width"] + 1
    assert opened.problems == []


def test_rows_come_in_module_order_with_the_heavy_layers_shown(
    opened: Opened, session: ProfileSession
) -> None:
    table = layer_table(session)
    order = [r.path for r in table.rows]
    shown = opened.visible()
    assert shown == sorted(shown, key=order.index)  # module order, not heaviest first
    heaviest = max(table.layers(), key=lambda r: r.own_us)
    assert heaviest.path in shown  # on screen without a click
    said = opened.page.text_content("#tree p.order") or ""
    assert said.startswith("Rows in module order")
    assert opened.problems == []


def test_the_icicle_zooms_into_the_block_clicked(opened: Opened) -> None:
    page = opened.page
    forward = page.locator("#icicle-forward svg.icicle")
    assert page.locator("#icicle-backward svg.icicle g").count() > 0  # beside it: the backward
    width = forward.evaluate("s => s.getBoundingClientRect().width")
    block = forward.locator("g[data-i]").filter(has=page.locator("rect[y='40']")).first
    index = block.get_attribute("data-i")
    assert index is not None
    others = forward.locator("g[data-i]").count()
    block.locator("rect").click()
    zoomed = forward.locator(f"g[data-i='{index}'] rect")
    assert float(zoomed.get_attribute("x") or -1) == pytest.approx(0, abs=1)
    assert float(zoomed.get_attribute("width") or 0) == pytest.approx(width, abs=2)
    assert forward.locator("g[data-i]").count() < others  # what is outside it is gone
    assert (page.text_content("#icicle-where") or "").startswith("Zoomed into h.")
    page.click("#icicle-reset")
    assert forward.locator("g[data-i]").count() == others
    assert page.is_hidden("#icicle-reset")
    assert opened.problems == []
