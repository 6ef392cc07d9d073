"""The memory section of a real profiled session in headless Chromium: the timeline and the bar
chart are drawn, the peak is marked, nothing errs or loads, a hostile name runs nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.reporting import write_report
from tests.browser.chromium import NEEDS_CHROMIUM
from tests.browser.test_html_browser import Opened, browser  # noqa: F401 (the fixture)
from tests.memory_sessions import hostile_memory_session

pytestmark = [
    pytest.mark.browser,
    NEEDS_CHROMIUM,
]


class Spike(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tmp = torch.ones(4 * 2**20)
        return x + tmp.sum() * 0


def test_the_timeline_and_the_bar_chart_are_drawn(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), Spike(), nn.ReLU(), nn.Linear(64, 8))
    session = hybridprof.profile(
        model, torch.randn(16, 64), warmup=1, iters=2, backward=True, profile_memory=True
    )
    opened = Opened(browser, write_report(session, tmp_path / "r.html"))
    page = opened.page
    timeline = page.locator("#chart-memory-timeline svg")
    box = timeline.bounding_box()
    assert box is not None and box["width"] > 400 and box["height"] > 150
    points = page.eval_on_selector("svg.memory-timeline polyline", "p => p.points.numberOfItems")
    assert points > 4
    label = page.eval_on_selector("svg.memory-timeline g.peak title", "t => t.textContent")
    assert "in the forward of 1" in label
    lanes = page.eval_on_selector_all("svg.memory-timeline rect[fill-opacity]", "rs => rs.length")
    assert lanes >= 4  # forward and backward of the layers
    bars = page.locator("#chart-activations svg").bounding_box()
    assert bars is not None and bars["width"] > 300
    heads = page.eval_on_selector_all("#layers thead th", "hs => hs.map(h => h.textContent)")
    assert {"Peak (fwd)", "Saved", "Peak (bwd)", "Net self mem"} <= set(heads)
    assert opened.problems == []


def test_a_hostile_name_in_the_memory_section_runs_nothing(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    opened = Opened(browser, write_report(hostile_memory_session(), tmp_path / "h.html"))
    assert opened.page.locator("#memory").count() == 1
    assert opened.page.locator("#memory img").count() == 0
    assert opened.problems == []


def test_the_notebook_view_of_a_memory_run_opens_on_the_table(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The notebook's frame is 600 px high: the layer table comes first, under the header; the
    memory section, the charts and the findings follow it (docs/library.md says so)."""
    from hybridprof.reporting.notebook import FRAME_HEIGHT_PX, notebook_page

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), Spike(), nn.ReLU(), nn.Linear(64, 8))
    session = hybridprof.profile(
        model, torch.randn(16, 64), warmup=1, iters=2, backward=True, profile_memory=True
    )
    page_file = tmp_path / "nb.html"
    page_file.write_text(notebook_page(session))
    opened = Opened(browser, page_file)
    top = opened.page.evaluate(
        "ids => ids.map(i => document.getElementById(i).getBoundingClientRect().top)",
        ["tree", "memory", "charts", "findings"],
    )
    tree, memory, charts, findings = top
    assert tree < FRAME_HEIGHT_PX / 2  # on screen when the frame opens
    assert tree < memory and tree < charts < findings
    assert opened.problems == []


def test_the_report_of_a_memory_run_has_the_layer_table_before_the_memory_section(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), Spike(), nn.ReLU(), nn.Linear(64, 8))
    session = hybridprof.profile(model, torch.randn(16, 64), warmup=1, iters=2, profile_memory=True)
    opened = Opened(browser, write_report(session, tmp_path / "r.html"))
    tree, memory = opened.page.evaluate(
        "ids => ids.map(i => document.getElementById(i).getBoundingClientRect().top)",
        ["tree", "memory"],
    )
    assert tree < memory
    assert opened.problems == []
