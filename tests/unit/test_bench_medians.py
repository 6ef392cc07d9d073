"""benchmarks/bench_reports.py: a step a page could not time is left out of its medians (it used
to enter them as -1 ms)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_reports", BENCHMARKS / "bench_reports.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_an_untimed_step_is_left_out_of_the_median(bench) -> None:  # type: ignore[no-untyped-def]
    assert bench.timed_median([10.0, None, 30.0]).strip() == "20(2)"
    assert bench.timed_median([10.0, 20.0, 30.0]).strip() == "20"
    assert bench.timed_median([None, None]).strip() == "n/a"


def test_ratios_pair_only_rounds_timed_in_both(bench) -> None:  # type: ignore[no-untyped-def]
    assert bench.ratio_median([20.0, None, 40.0], [10.0, 10.0, None]).strip() == "2.000"
    assert bench.ratio_median([None], [10.0]).strip() == "n/a"


def test_the_page_script_reports_a_missing_element_as_untimed() -> None:
    source = (BENCHMARKS / "report_browser.py").read_text(encoding="utf-8")
    assert "return null;" in source and "return -1" not in source
