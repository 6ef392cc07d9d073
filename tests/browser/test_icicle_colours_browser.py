"""The icicle of a real 4-block GPT as headless Chromium draws it: within the chart no two layer
classes share a colour, the parents (GPT, Block, Attention, MLP) are drawn lighter and outlined
apart from the leaves, and every block's tooltip gives its total, self time and share."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from hybridprof.api import profile
from hybridprof.reporting import write_report
from tests.browser.chromium import NEEDS_CHROMIUM, launch
from tests.browser.test_html_browser import Opened
from tests.paths import FIXTURES

pytestmark = [
    pytest.mark.browser,
    NEEDS_CHROMIUM,
]
TIP = re.compile(r"^(\S+) \((\w+)\): total \S+, self \S+, [0-9.]+% of the pass$")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    spec = importlib.util.spec_from_file_location("gpt_blocks", FIXTURES / "gpt_blocks.py")
    assert spec is not None and spec.loader is not None
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    session = profile(gpt.build_model(), gpt.example_inputs(), warmup=1, iters=2)
    return write_report(session, tmp_path_factory.mktemp("gpt") / "gpt.html")


@pytest.fixture(scope="module")
def opened(report: Path) -> Iterator[Opened]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = Opened(browser, report)
        page.page.set_viewport_size({"width": 1400, "height": 900})
        yield page
        browser.close()


def drawn_blocks(opened: Opened) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = opened.page.eval_on_selector_all(
        "#icicle-forward svg.icicle g[data-i]",
        """gs => gs.map(g => { const r = g.querySelector('rect'); return {
            tip: g.querySelector('title').textContent, fill: r.getAttribute('fill'),
            opacity: r.getAttribute('fill-opacity'), stroke: r.getAttribute('stroke') }; })""",
    )
    return blocks


def test_each_class_has_a_colour_of_its_own_and_parents_stand_apart(opened: Opened) -> None:
    blocks = drawn_blocks(opened)
    assert len(blocks) >= 20
    by_class: dict[str, set[str]] = {}
    kinds: dict[str, set[str | None]] = {}
    for block in blocks:
        found = TIP.match(block["tip"])
        assert found, block["tip"]  # total, self and share in every tooltip
        by_class.setdefault(found[2], set()).add(block["fill"])
        kinds.setdefault(found[2], set()).add(block["opacity"])
    # the parents always draw; the leaves drawn are those over a pixel wide (a busy machine can
    # make the LayerNorms so slow that the Linears are hairlines)
    assert {"GPT", "Block", "Attention", "MLP"} <= set(by_class) and len(by_class) >= 6
    fills = [next(iter(f)) for f in by_class.values()]
    assert all(len(f) == 1 for f in by_class.values())  # one class, one colour
    assert len(set(fills)) == len(fills)  # no two classes share one
    assert kinds["Block"] == kinds["MLP"] == {"0.5"}  # parents: lighter, outlined
    leaves = {"Linear", "LayerNorm", "GELU", "Embedding"} & set(kinds)
    assert leaves and all(kinds[c] == {None} for c in leaves)  # leaves: solid
    assert opened.problems == []


def test_the_chart_looks_right(opened: Opened, tmp_path: Path) -> None:
    """A picture of the chart to look at (kept under the test's tmp folder)."""
    shot = tmp_path / "icicle.png"
    opened.page.locator("#icicle").screenshot(path=str(shot))
    assert shot.stat().st_size > 5_000
