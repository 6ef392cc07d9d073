"""The browser tests find Debian's chromium the one way `tests/browser/chromium.py` says, and the
install guide tells a contributor how (Playwright's own browser is never downloaded)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.chromium import NEEDS_CHROMIUM, launch
from tests.paths import ROOT


def test_every_browser_is_launched_through_the_shared_launcher() -> None:
    launches = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("*.py")
        if re.search(r"\.chromium\.launch\(", path.read_text(encoding="utf-8"))
    }
    assert launches == {"tests/browser/chromium.py"}  # a bare launch() fails: no browser download


def test_the_install_guide_says_how_the_browser_tests_find_chromium() -> None:
    guide = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    section = guide.split("## Browser tests", 1)[1].split("\n## ", 1)[0]
    assert 'executable_path=shutil.which("chromium")' in section
    assert "playwright install" in section and "skip" in section


@pytest.mark.browser
@NEEDS_CHROMIUM
def test_the_launcher_opens_a_page_offline(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "p.html"
    page_file.write_text("<!doctype html><title>t</title><p id=x>offline</p>")
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        page.goto(page_file.as_uri())
        assert page.text_content("#x") == "offline"
        browser.close()
