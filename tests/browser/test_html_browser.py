"""The HTML report in headless Chromium (Debian's, driven by Playwright): no console error, no
network request, collapse/expand, sort, filter, depth, lazy op tables, a big report stays usable."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from hybridprof.reporting import write_report
from tests.browser.chromium import NEEDS_CHROMIUM, launch
from tests.sessions import HOSTILE, big_session, hostile_session, nested_session

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


class Opened:
    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page()
        self.problems: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on(
            "request",
            lambda r: None if r.url == path.as_uri() else self.problems.append(f"request {r.url}"),
        )
        self.page.on("dialog", self._dialog)
        self.page.goto(path.as_uri())

    def _dialog(self, dialog: Any) -> None:  # an alert() from injected markup would land here
        self.problems.append(f"dialog {dialog.message}")
        dialog.dismiss()

    def visible(self) -> list[str]:
        return list(
            self.page.eval_on_selector_all(
                "#layers tr.row:not([hidden])", "rs => rs.map(r => r.dataset.path)"
            )
        )

    def order(self) -> list[str]:
        return list(
            self.page.eval_on_selector_all("#layers tr.row", "rs => rs.map(r => r.dataset.path)")
        )


@pytest.fixture
def nested(browser: Any, tmp_path: Path) -> Iterator[Opened]:
    opened = Opened(browser, write_report(nested_session(), tmp_path / "r.html"))
    yield opened
    opened.page.close()


ALL = [
    "",
    "blocks",
    "blocks.0",
    "blocks.0.conv",
    "blocks.0.act",
    "blocks.1",
    "blocks.1.conv",
    "blocks.1.act",
]


def test_loads_without_console_error_or_request(nested: Opened) -> None:
    assert nested.visible() == ALL
    assert nested.page.text_content("#shown") == "8 of 8 rows"
    assert nested.problems == []


def test_collapse_and_expand_a_subtree(nested: Opened) -> None:
    toggle = nested.page.locator("tr[data-path='blocks.0'] button.toggle")
    toggle.click()
    assert nested.visible() == [
        "",
        "blocks",
        "blocks.0",
        "blocks.1",
        "blocks.1.conv",
        "blocks.1.act",
    ]
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    assert nested.visible() == ALL
    nested.page.click("#collapse-all")
    assert nested.visible() == ["", "blocks"]
    nested.page.click("#expand-all")
    assert nested.visible() == ALL
    assert nested.problems == []


def test_sort_a_column_keeps_children_under_their_parent(nested: Opened) -> None:
    header = nested.page.locator("#layers thead th", has_text="Self CPU")
    header.click()  # numbers sort descending first
    assert header.get_attribute("aria-sort") == "descending"
    assert nested.order() == [
        "",
        "blocks",
        "blocks.0",
        "blocks.0.conv",
        "blocks.0.act",
        "blocks.1",
        "blocks.1.conv",
        "blocks.1.act",
    ]
    header.click()
    assert nested.order() == [
        "",
        "blocks",
        "blocks.0",
        "blocks.0.act",
        "blocks.0.conv",
        "blocks.1",
        "blocks.1.act",
        "blocks.1.conv",
    ]
    nested.page.locator("#layers thead th", has_text="Layer").click()
    assert nested.order() == ALL
    assert nested.problems == []


def test_filter_by_path_and_depth_control(nested: Opened) -> None:
    nested.page.fill("#filter", "1.conv")
    expect(nested.page.locator("#shown")).to_have_text(re.compile(r"^4 of"))
    assert nested.visible() == ["", "blocks", "blocks.1", "blocks.1.conv"]
    nested.page.fill("#filter", "")
    expect(nested.page.locator("#shown")).to_have_text(re.compile(r"^8 of"))
    nested.page.select_option("#depth", "2")
    assert nested.visible() == ["", "blocks", "blocks.0", "blocks.1"]
    assert nested.problems == []


def test_op_table_is_built_on_demand(nested: Opened) -> None:
    button = nested.page.locator("tr[data-path='blocks.0.conv'] button.ops")
    assert nested.page.locator("tr.detail").count() == 0
    button.click()
    detail = nested.page.locator("tr.detail table.ops-table")
    assert detail.locator("tbody td").first.text_content() == "aten::conv2d"
    assert "340.000us" in detail.text_content()
    button.click()
    assert nested.page.locator("tr.detail").is_hidden()
    assert nested.problems == []


def test_hostile_name_runs_nothing(browser: Any, tmp_path: Path) -> None:
    opened = Opened(browser, write_report(hostile_session(), tmp_path / "h.html"))
    opened.page.locator(f"tr[data-path='{HOSTILE}'] button.ops").click()
    assert opened.page.locator("img").count() == 0
    assert (
        opened.page.locator("tr.detail table.ops-table tbody td").first.text_content()
        == f"aten::{HOSTILE}"
    )
    assert opened.problems == []
    opened.page.close()


def test_big_report_renders_and_filters(browser: Any, tmp_path: Path) -> None:
    opened = Opened(browser, write_report(big_session(leaves=2000), tmp_path / "big.html"))
    shown = opened.page.text_content("#shown") or ""
    assert shown.endswith(" of 2402 rows") and int(shown.split()[0]) < 2402  # opens collapsed
    opened.page.click("#expand-all")
    assert opened.page.text_content("#shown") == "2402 of 2402 rows"
    opened.page.fill("#filter", "blocks.150.layers.7")
    # the expectation's own timeout is the hang guard; how fast it is, bench_reports.py measures
    expect(opened.page.locator("#shown")).to_have_text(re.compile(r"^5 of"), timeout=10_000)
    assert opened.visible()[-1] == "blocks.150.layers.7"
    assert opened.problems == []
    opened.page.close()


@pytest.fixture(scope="module")
def big_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(big_session(leaves=3000), tmp_path_factory.mktemp("big") / "big.html")


# The layer table scrolls in its own box: bring the box into view, then scroll it to its end.
SCROLL_TO_END = (
    "() => { const box = document.getElementById('layers-scroll');"
    " box.scrollIntoView(); box.scrollTop = box.scrollHeight; }"
)


def drawn(opened: Opened) -> int:
    return int(opened.page.eval_on_selector_all("#layers tr.row", "rs => rs.length"))


def test_a_big_table_draws_only_the_rows_on_screen(browser: Any, big_report: Path) -> None:
    opened = Opened(browser, big_report)
    opened.page.click("#expand-all")
    assert opened.page.text_content("#shown") == "3602 of 3602 rows"
    assert 0 < drawn(opened) < 300  # the screen and a margin, not 3,602 rows
    table_height = opened.page.eval_on_selector("#layers tbody", "b => b.offsetHeight")
    row_height = opened.page.eval_on_selector("#layers tr.row", "r => r.offsetHeight")
    assert table_height == pytest.approx(3602 * row_height, abs=3602)  # spacers stand for the rest
    opened.page.evaluate(SCROLL_TO_END)
    expect(opened.page.locator("#layers tr.row").last).to_have_attribute("data-i", "3601")
    last = opened.page.locator("#layers tr.row").last.bounding_box()
    foot = opened.page.eval_on_selector("#layers", "t => t.getBoundingClientRect().bottom")
    assert last is not None and last["y"] + last["height"] == pytest.approx(foot, abs=2)
    assert opened.problems == []
    opened.page.close()


def test_sorting_a_big_table_orders_siblings_across_the_whole_tree(
    browser: Any, big_report: Path
) -> None:
    opened = Opened(browser, big_report)
    opened.page.click("#expand-all")
    header = opened.page.locator("#layers thead th", has_text="Self CPU")
    header.click()
    header.click()  # ascending: the opposite of the heaviest-first order the page opens with
    opened.page.fill("#filter", "blocks.7.layers.")
    expect(opened.page.locator("#shown")).to_have_text(re.compile(r"^14 of"))
    leaves = opened.page.eval_on_selector_all(
        "#layers tr.row[data-depth='4']", "rs => rs.map(r => r.cells[3].textContent)"
    )
    times = [float(t.removesuffix("us")) for t in leaves]
    assert len(times) == 10 and times == sorted(times) and times != sorted(times, reverse=True)
    assert opened.problems == []
    opened.page.close()


def test_an_open_op_table_pushes_the_rows_below_it_down(browser: Any, big_report: Path) -> None:
    opened = Opened(browser, big_report)
    opened.page.click("#expand-all")
    row = opened.page.locator("tr[data-path='blocks.0.layers.0']")
    row.locator("button.ops").click()
    detail = opened.page.locator("tr.detail")
    assert detail.locator("tbody tr").count() == 4  # big_session's 4 ops a leaf
    gap = opened.page.eval_on_selector(
        "tr.detail",
        "d => d.nextElementSibling.getBoundingClientRect().top - d.getBoundingClientRect().bottom",
    )
    assert gap == pytest.approx(0, abs=1)
    assert opened.page.eval_on_selector(
        "tr.detail", "d => d.nextElementSibling.classList.contains('row')"
    )
    # the whole table is taller by the op table: scrolling to the end still ends on the last row
    opened.page.evaluate(SCROLL_TO_END)
    expect(opened.page.locator("#layers tr.row").last).to_have_attribute("data-i", "3601")
    assert opened.problems == []
    opened.page.close()


def test_source_locations_are_listed_when_opened(nested: Opened) -> None:
    sources = nested.page.locator("#sources tbody tr")
    assert sources.count() == 0
    nested.page.click("#sources summary")
    expect(sources.first).to_be_visible()
    assert "blocks.0.conv" in (nested.page.text_content("#sources tbody") or "")
    assert "nets.py:" in (nested.page.text_content("#sources tbody") or "")
    assert nested.problems == []


def test_printing_from_the_browser_draws_every_shown_row(browser: Any, big_report: Path) -> None:
    opened = Opened(browser, big_report)
    opened.page.click("#expand-all")
    opened.page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    assert drawn(opened) == 3602
    opened.page.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
    assert drawn(opened) < 300
    assert opened.problems == []
    opened.page.close()


def test_a_long_source_list_opens_a_page_at_a_time(browser: Any, big_report: Path) -> None:
    opened = Opened(browser, big_report)
    opened.page.click("#sources summary")
    rows = opened.page.locator("#sources tbody tr")
    expect(rows).to_have_count(500)
    more = opened.page.locator("#more-sources")
    assert more.text_content() == "Show 500 more (3101 not shown)"
    for _ in range(7):
        more.click()
    expect(rows).to_have_count(3601)  # every layer the plan knows: 3,000 leaves, their parents
    assert more.is_hidden()
    assert opened.problems == []
    opened.page.close()
