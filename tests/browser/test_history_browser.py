"""The history page in headless Chromium: no console error, no request, no script from a name;
the differential icicle its script draws matches the one laid out in Python, for the pair it
opens with and any other chosen; the readout names the commit under the pointer; the filter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybridprof.history.overview import HistoryOverview, overview
from hybridprof.history.series import read_window
from hybridprof.history.store import open_store
from hybridprof.reporting.history.history_icicle import pair_blocks
from hybridprof.reporting.history.history_page import default_pair, write_history_report
from tests.browser.chromium import NEEDS_CHROMIUM, launch
from tests.browser.test_html_browser import Opened
from tests.history_synthetic import fill_history, layer_paths, synthetic_history
from tests.sessions import HOSTILE

pytestmark = [
    pytest.mark.browser,
    NEEDS_CHROMIUM,
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[tuple[Opened, HistoryOverview]]:
    history = synthetic_history(0)
    paths = [*layer_paths(39), f"{HOSTILE}:Evil</script><b>"]
    db = tmp_path / "h.sqlite"
    fill_history(db, history.values, paths=paths)
    with open_store(db) as store:
        (series,) = store.all_series()
        view = overview(str(db), read_window(store, series))
    report = write_history_report(view, tmp_path / "history.html")
    opened = Opened(browser, report)
    yield opened, view
    opened.page.close()


def drawn(opened: Opened) -> list[list[Any]]:
    blocks: list[list[Any]] = json.loads(opened.page.get_attribute("#icicle", "data-blocks"))
    return blocks


def laid_out(view: HistoryOverview, pair: tuple[int, int]) -> list[list[Any]]:
    blocks = pair_blocks(
        view.window.paths,
        view.window.self_us,
        pair,
        view.min_change_pct,
        view.noise_pct,
        view.drift,
    )
    return [[b.path, b.depth, round(b.x0, 6), round(b.x1, 6), b.color] for b in blocks]


def same_blocks(a: list[list[Any]], b: list[list[Any]]) -> bool:
    """The same blocks in the same order and colours; edges within 1e-4 of the width (the page's
    data holds times to 4 significant digits)."""
    return len(a) == len(b) and all(
        x[:2] == y[:2] and abs(x[2] - y[2]) < 1e-4 and abs(x[3] - y[3]) < 1e-4 and x[4] == y[4]
        for x, y in zip(a, b, strict=True)
    )


def test_the_page_draws_the_icicle_python_lays_out(page: tuple[Opened, HistoryOverview]) -> None:
    opened, view = page
    pair = default_pair(view)
    assert same_blocks(drawn(opened), laid_out(view, pair))
    opened.page.select_option("#base", "3")
    opened.page.select_option("#new", "50")
    assert same_blocks(drawn(opened), laid_out(view, (3, 50)))
    caption = opened.page.text_content("#pair") or ""
    assert caption.startswith("4: 0004") and "→ 51: 0051" in caption
    assert opened.problems == []


def test_the_readout_names_the_commit_under_the_pointer(
    page: tuple[Opened, HistoryOverview],
) -> None:
    opened, _ = page
    chart = opened.page.locator("svg.series").nth(1)
    box = chart.bounding_box()
    assert box is not None
    opened.page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] / 2)
    text = opened.page.text_content("#readout") or ""
    assert text.startswith("commit 60 0060") and "commit 60:" in text
    assert opened.problems == []


def test_the_filter_hides_other_layers_and_names_stay_text(
    page: tuple[Opened, HistoryOverview],
) -> None:
    opened, _ = page
    opened.page.fill("#filter", "blocks.3.")
    shown = opened.page.eval_on_selector_all(
        "#panels .panel:not([hidden]) h3", "hs => hs.map(h => h.textContent)"
    )
    assert shown and all(title.startswith("blocks.3.") for title in shown)
    opened.page.fill("#filter", "evil")
    titles = opened.page.eval_on_selector_all(
        "#panels .panel:not([hidden]) h3", "hs => hs.map(h => h.textContent)"
    )
    assert titles == [f"{HOSTILE} (Evil</script><b>)"]
    assert opened.problems == []  # no alert(), no request, no error
