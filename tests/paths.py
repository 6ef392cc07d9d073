"""Where the suite's files are: tests are grouped in folders of different depths, so none
works out the repository from its own `__file__`."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent  # tests/
ROOT = TESTS.parent  # the repository
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
