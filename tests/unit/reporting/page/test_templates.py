"""The HTML report parsed as HTML: structure, formatted numbers, escaping, and no network
address."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import jinja2
import pytest

from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_html, render_page, script_json, template_env
from tests.report_page import page_ops, page_rows
from tests.sessions import HOSTILE, big_session, hostile_session, nested_session, small_session

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src {}; img-src data:"


class Page(HTMLParser):
    """Collects what the tests look at: rows by path, cell texts, attributes, scripts and tags."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.cells: dict[str, list[str]] = {}
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[tuple[dict[str, str], str]] = []
        self._row: str | None = None
        self._script: dict[str, str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "tr" and "data-path" in a:
            self._row = a["data-path"]
            self.rows[self._row] = a
            self.cells[self._row] = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "script":
            self._script = a

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self.cells[self._row].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts.append((self._script, data))
            self._script = None
        if self._cell is not None:
            self._cell.append(data)


def test_environment_autoescapes_and_is_strict() -> None:
    env = template_env()
    assert env.autoescape is True
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing.name }}").render()


def test_every_path_is_a_row_with_formatted_numbers() -> None:
    rows = page_rows(render_html(nested_session()))
    assert set(rows) == {
        "",
        "blocks",
        "blocks.0",
        "blocks.0.conv",
        "blocks.0.act",
        "blocks.1",
        "blocks.1.conv",
        "blocks.1.act",
    }
    conv = list(rows["blocks.0.conv"].cells.values())
    # 3 calls over 3 iterations: the table shows calls per iteration, like its times
    assert conv[:5] == ["conv", "Conv2d", "1", "340.000us", "340.000us"]
    assert "34.0%" in conv
    assert "306.000us–374.000us" in conv
    assert rows["blocks.0.conv"].parent == "blocks.0"
    assert rows[""].parent is None
    assert rows["blocks.0.conv"].heat == 5


def test_the_page_draws_the_rows_the_pdf_renders() -> None:
    """The table is data in the page (drawn by its script), markup only in the PDF."""
    html = render_html(nested_session())
    assert 'data-path="blocks.0.conv"' not in html
    pdf_page = render_page(build_context(nested_session(), "pdf"))
    assert 'data-path="blocks.0.conv"' in pdf_page and 'id="hp-data"' not in pdf_page
    headers = [t for t in Page(html).tags if t[0] == "th" and t[1].get("data-type")]
    assert [a["data-type"] for _, a in headers][:4] == ["tree", "text", "num", "num"]
    assert "<noscript>" in html  # without JavaScript the page says how to see the table


def test_header_charts_and_findings_are_present() -> None:
    text = render_html(nested_session())
    for needle in (
        "nets.py",
        "make_net",
        "2.13.0+cpu",
        "Test CPU @ 2.0GHz",
        "2 warm-up, 3 measured",
        "Top 7 layers by self CPU time",
        "Self CPU time by layer type",
        "Parents whose own inline ops take time",
        "nets.py:44",
        "kineto_results.events() is readable",
        "iteration 1 was 30% slower",
    ):
        assert needle in text, needle
    assert text.count("<svg") == 3  # two bar charts and the icicle (drawn by the page)


def test_op_rows_are_embedded_as_json_for_every_layer() -> None:
    text = render_html(small_session())
    ops = page_ops(text)
    assert [o[0] for o in ops["fc1"]] == ["aten::addmm", "aten::t"]
    assert ops["fc2"][0][2] == "300.000us"
    assert [r.op_count for r in page_rows(text).values() if r.op_count] == [2, 1, 1]


def test_csp_forbids_network_loads_and_allows_only_our_script() -> None:
    page = Page(render_html(small_session()))
    metas = [
        a
        for tag, a in page.tags
        if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    code = [body for attrs, body in page.scripts if "type" not in attrs]
    assert len(code) == 1  # the one executable script; the data block is application/json
    digest = base64.b64encode(hashlib.sha256(code[0].encode()).digest()).decode()
    assert [m["content"] for m in metas] == [CSP.format(f"'sha256-{digest}'")]
    assert "unsafe-inline'; img" not in metas[0]["content"]


@pytest.mark.parametrize("factory", [small_session, nested_session, hostile_session])
def test_no_external_url_anywhere(factory: object) -> None:
    text = render_html(factory())  # type: ignore[operator]
    assert not re.search(r"https?://", text)
    assert not re.search(r"""["'(\s]//[A-Za-z0-9]""", text)  # protocol-relative //host
    for tag, attrs in Page(text).tags:
        for key in ("src", "href", "action", "data", "poster"):
            if key in attrs:
                assert attrs[key].startswith(("data:", "#")), (tag, key, attrs[key])


def test_hostile_names_are_text_not_markup() -> None:
    text = render_html(hostile_session())
    page = Page(text)
    assert HOSTILE in page_rows(text)  # the data round-trips to the original name
    assert not any(tag == "img" for tag, _ in page.tags)
    assert not any(tag == "b" for tag, _ in page.tags)
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    scripts = [body for _, body in page.scripts]
    assert all("</script>" not in s and "<img" not in s for s in scripts)
    assert page_ops(text)[HOSTILE][0][0] == f"aten::{HOSTILE}"
    assert page_rows(text)[HOSTILE].cells["Class"] == "Evil</script><b>"


@pytest.mark.parametrize("name", ["</script><script>alert(1)</script>", "<!--", "a\u2028b\u2029c"])
def test_script_json_keeps_any_text_inside_its_script_element(name: str) -> None:
    text = script_json({"name": name, "rows": [[name]]})
    for unsafe in ("<", ">", "&", "\u2028", "\u2029"):
        assert unsafe not in text
    assert json.loads(text) == {"name": name, "rows": [[name]]}


def test_big_session_stays_small_with_all_ops() -> None:
    text = render_html(big_session(leaves=2000))
    assert len(text.encode("utf-8")) < 2 * 1024 * 1024
    assert len(page_rows(text)) == 2000 + 2 * 200 + 2  # leaves, blocks.i(.layers), root, "blocks"
    assert len(page_ops(text)) == 2000


def test_a_missing_template_is_a_one_line_error() -> None:
    from hybridprof.errors import ReportDependencyError
    from hybridprof.reporting.page.templates import _read_template

    with pytest.raises(
        ReportDependencyError, match=r"'nope\.j2' not found in package hybridprof\._templates"
    ):
        _read_template("nope.j2")
