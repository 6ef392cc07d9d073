"""scripts/check_wheel.py: a built wheel ships the templates and renders reports from an install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT

SCRIPT = ROOT / "scripts" / "check_wheel.py"


@pytest.mark.slow
def test_wheel_ships_templates_and_renders_from_an_install() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "wheel OK" in done.stdout
    assert (
        "/site/hybridprof/_templates" in done.stdout
    )  # not the editable checkout's reports/templates
