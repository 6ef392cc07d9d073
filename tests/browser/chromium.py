"""How the browser tests reach a browser: Playwright's Python package drives Debian's `chromium`
(installed by `bash scripts/setup.sh --test`), found on PATH and passed as `executable_path`.

Playwright's own browser is never downloaded (`playwright install` needs the network, and a plain
`p.chromium.launch()` fails without it), so every test launches through `launch` here; without a
`chromium` on PATH the browser tests skip (`NEEDS_CHROMIUM`). The flags keep it offline and quiet.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NEEDS_CHROMIUM = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="needs Debian's chromium: bash scripts/setup.sh --test (or apt-get install chromium)",
)


def launch(playwright: Any) -> Any:
    """A headless Chromium: Debian's, never Playwright's own download."""
    return playwright.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
