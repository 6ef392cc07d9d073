"""The suite's folders say what they test: `tests/unit/<package>/...` mirrors `hybridprof/`, so the
tests of `hybridprof/runtime/memory/replay.py` are found under `tests/unit/runtime/memory/`."""

from __future__ import annotations

from tests.paths import ROOT

UNIT = ROOT / "tests" / "unit"
PACKAGE = ROOT / "hybridprof"


def test_every_unit_test_folder_mirrors_a_package() -> None:
    folders = [d for d in UNIT.rglob("*") if d.is_dir() and d.name != "__pycache__"]
    assert folders, "no unit test folders found"
    missing = [
        str(d.relative_to(UNIT)) for d in folders if not (PACKAGE / d.relative_to(UNIT)).is_dir()
    ]
    assert missing == []


def test_only_whole_package_tests_sit_at_the_top_of_unit() -> None:
    # The layer rule and the benchmarks' helpers test no one package; everything else has a folder.
    top = sorted(p.name for p in UNIT.glob("test_*.py"))
    assert top == ["test_bench_medians.py", "test_layers.py", "test_tests_layout.py"]
