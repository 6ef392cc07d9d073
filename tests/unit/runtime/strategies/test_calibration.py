"""The profiler's calibrated cost: measured on real torch, cached per machine and torch version,
recorded in the session (schema 12); older sessions load without one."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import SCHEMA_VERSION, Calibration, ProfileSession
from hybridprof.runtime.strategies import calibrate as calibration_module
from hybridprof.runtime.strategies.calibrate import (
    CACHE_FILE,
    measure_calibration,
    session_calibration,
)
from tests.paths import FIXTURES


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "hybridprof" / CACHE_FILE


def test_the_costs_are_measured_finite_and_not_below_zero() -> None:
    found = measure_calibration()
    costs = (found.event_us, found.range_inner_us, found.range_outer_us)
    assert all(math.isfinite(c) and 0.0 <= c < 1000.0 for c in costs)
    assert found.event_us + found.range_us > 0  # a profiler that costs nothing is a bug
    assert found.source == "measured" and found.measured_at.endswith("+00:00")


def test_the_first_run_measures_and_caches_then_later_runs_read_the_cache(own_cache: Path) -> None:
    first = session_calibration()
    assert first is not None and first.source == "measured" and own_cache.is_file()
    second = session_calibration()
    assert second == replace(first, source="cached")


def test_a_damaged_cache_entry_is_measured_again(own_cache: Path) -> None:
    assert session_calibration() is not None
    entries = json.loads(own_cache.read_text(encoding="utf-8"))
    key = next(iter(entries))
    entries[key]["event_us"] = -1.0
    own_cache.write_text(json.dumps(entries), encoding="utf-8")
    again = session_calibration()
    assert again is not None and again.source == "measured" and again.event_us >= 0


def test_an_unwritable_cache_still_gives_a_measured_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    found = session_calibration()
    assert found is not None and found.source == "measured"


def test_a_profiler_already_running_leaves_the_session_uncalibrated(own_cache: Path) -> None:
    with torch.autograd.profiler.profile():
        assert session_calibration() is None
    assert not own_cache.exists()


def test_the_session_records_its_calibration_and_keeps_it_through_json(own_cache: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    session = hybridprof.profile(model, torch.rand(2, 8), iters=2)
    assert isinstance(session, ProfileSession) and session.calibration is not None
    assert session.schema_version == SCHEMA_VERSION == 13
    again = ProfileSession.from_json(session.to_json())
    assert again.calibration == session.calibration


def test_other_strategies_are_not_calibrated(own_cache: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    session = hybridprof.profile(model, torch.rand(2, 8), iters=2, strategy="timer")
    assert isinstance(session, ProfileSession) and session.calibration is None


def test_older_sessions_load_without_a_calibration() -> None:
    old = ProfileSession.from_json((FIXTURES / "session_schema4.json").read_text())
    assert old.schema_version == 4 and old.calibration is None
    assert "calibration" not in json.loads(replace(old, calibration=None).to_json())


def test_a_calibration_with_a_negative_cost_is_refused_from_the_cache() -> None:
    entry = {
        "event_us": 0.3,
        "range_inner_us": -0.1,
        "range_outer_us": 1.0,
        "call_us": 0.8,
        "measured_at": "x",
    }
    assert calibration_module._from_cache(entry) is None
    fine = calibration_module._from_cache({**entry, "range_inner_us": 0.1})
    assert fine == Calibration(0.3, 0.1, 1.0, "cached", "x", call_us=0.8)


def test_a_cached_calibration_from_before_the_call_cost_is_measured_again() -> None:
    entry = {"event_us": 0.3, "range_inner_us": 0.1, "range_outer_us": 1.0, "measured_at": "x"}
    assert calibration_module._from_cache(entry) is None  # no call_us: session_calibration measures


def test_the_bare_call_of_a_module_is_measured_and_recorded(own_cache: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    session = hybridprof.profile(model, torch.rand(2, 8), iters=2)
    assert isinstance(session, ProfileSession) and session.calibration is not None
    assert 0.0 < session.calibration.call_us < 100.0
    again = ProfileSession.from_json(session.to_json())
    assert again.calibration == session.calibration
