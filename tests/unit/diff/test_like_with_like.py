"""`diff` and the gate compare like with like: two calibrated runs on their compensated figures,
else both on their raw ones (a lone calibration is dropped), and a note says which."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hybridprof.analysis.compensation import compensated
from hybridprof.analysis.layer_table import build_layer_table
from hybridprof.datamodel import Calibration, ProfileSession
from hybridprof.diff import diff_sessions
from hybridprof.diff.basis import like_with_like
from hybridprof.reporting.text.diff_text import render_diff_text
from tests.sessions import nested_session
from tests.unit.diff.test_sessions import run

# Costly enough that the compensated and the raw figures differ by far more than the threshold.
COSTS = Calibration(10.0, 5.0, 5.0, "measured", "2026-12-03T08:00:00+00:00")


def calibrated(session: ProfileSession) -> ProfileSession:
    return replace(session, calibration=COSTS)


def test_two_calibrated_runs_compare_their_compensated_figures() -> None:
    base, new = calibrated(run(1)), calibrated(run(2, heavier={"act": 1.6}, model_hash="def"))
    diff = diff_sessions(base, new)
    assert diff.notes[0].startswith("figures compared: compensated")
    fixed = compensated(base)
    assert fixed is not None
    act = next(r for r in fixed.session.records if r.path == "act")
    change = next(x for x in diff.layers if x.path == "act").change("self_cpu_us")
    assert change is not None and change.base == pytest.approx(act.self_cpu_us.median, abs=0.05)
    raw_act = next(r for r in base.records if r.path == "act").self_cpu_us.median
    assert change.base < raw_act  # the cost is out, so the change is a larger share of the rest
    assert diff.total.base == pytest.approx(build_layer_table(base).iteration_us)  # compensated
    assert "figures compared: compensated" in render_diff_text(diff)


def test_a_lone_calibration_is_dropped_so_both_runs_are_raw() -> None:
    base, new = calibrated(run(1)), run(2)  # the same model; only the base was calibrated
    diff = diff_sessions(base, new)
    assert diff.notes[0] == (
        "figures compared: raw, as measured (new has no calibration, so neither is compensated)"
    )
    raw_headline = build_layer_table(replace(base, calibration=None)).iteration_us
    assert diff.total.base == pytest.approx(raw_headline)
    assert raw_headline > build_layer_table(base).iteration_us
    # Compensated against raw, the profiler's cost would read as a slowdown: like with like, none.
    assert diff.total.ratio is not None and abs(diff.total.ratio - 1) < 0.05
    assert diff.total.verdict == "within noise" and diff.gate is not None
    assert diff.gate.answer == "pass"


def test_two_raw_runs_say_so() -> None:
    diff = diff_sessions(run(1), run(2))
    assert diff.notes[0].startswith("figures compared: raw, as measured (base and new have no")


def test_a_run_calibrated_before_the_dispatch_move_is_compared_without_it_on_both_sides() -> None:
    """A baseline saved before schema 13 (call_us 0) against a newer run: neither moves each
    call's dispatch into its layer, so the move alone reads as no change."""
    session = replace(nested_session(), calibration=COSTS)
    newer = replace(session, calibration=replace(COSTS, call_us=0.5))
    basis = like_with_like(session, newer)
    assert basis.compensated
    conv = {r.path: r for r in basis.new.records}["blocks.0.conv"]
    assert conv.self_cpu_us.median == 340.0 - 15.0  # as the older run's: nothing moved
    both = like_with_like(newer, newer)
    moved = {r.path: r for r in both.new.records}["blocks.0.conv"]
    assert moved.self_cpu_us.median == 340.0 - 15.0 + 0.5
