"""Schema 3: per-iteration series, stability, auto counts; schema 4: the same, compact (no defaults,
Stat lists, ops as columns); files of schemas 1-3 still load."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hybridprof.datamodel import (
    SCHEMA_VERSION,
    CpuWaits,
    IterationSeries,
    ProfileSession,
    Series,
    Stability,
)
from hybridprof.errors import SessionFileError
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.text_report import render_text_report
from tests.paths import FIXTURES
from tests.sessions import small_session

# Written by hybridprof before schema 4 (indented, every field, Stat dicts, ops as rows): the
# session of `auto_session()`.
SCHEMA_3_FILE = FIXTURES / "session_schema3.json"
STABILITY = Stability("noisy", 0.2345, 1.05, 2, "use one torch thread (--threads 1)")


def with_series(session: ProfileSession) -> ProfileSession:
    """Every record gets one value per iteration (3 here); totals only where they differ."""
    records = []
    for i, rec in enumerate(session.records):
        own = Series.of([rec.self_cpu_us.median + d for d in (0.04, -1.25, 2.0)])
        total = None if i else Series.of([rec.total_cpu_us.median] * 3)
        records.append(replace(rec, per_iteration=IterationSeries(own, total)))
    return replace(session, records=tuple(records), stability=STABILITY)


def test_series_are_saved_as_one_compact_string() -> None:
    assert Series.of([84.24, 85.0, -0.04, 12345.678]).encode() == "84.2 85 0 12345.7"
    assert Series.decode("84.2 85 0 12345.7") == Series((84.2, 85.0, 0.0, 12345.7))
    assert Series.decode("") == Series(())


@pytest.mark.parametrize("text", ["1 nan 2", "1 inf", "1e3", "1,2", "0x10"])
def test_series_refuse_anything_but_plain_numbers(text: str) -> None:
    with pytest.raises(ValueError, match="not a number"):
        Series.decode(text)


def auto_session() -> ProfileSession:
    return replace(
        with_series(small_session()),
        requested_iterations="auto",
        requested_warmup="auto",
        stop_reason="converged",
        max_time_s=30.0,
    )


def test_schema_3_round_trips_series_stability_and_auto_counts() -> None:
    session = auto_session()
    text = session.to_json()
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION >= 3  # series and stability since 3
    assert data["stability"] == {
        "verdict": "noisy",
        "iteration_cv": 0.2345,
        "load": 1.05,
        "threads": 2,
        "advice": "use one torch thread (--threads 1)",
    }
    assert data["records"][1]["per_iteration"]["self_cpu_us"] == "100 98.8 102"
    assert "total_cpu_us" not in data["records"][1]["per_iteration"]
    assert ProfileSession.from_json(text) == session


def test_a_schema_3_file_still_loads_with_the_same_numbers() -> None:
    old = ProfileSession.from_json(SCHEMA_3_FILE.read_text())
    assert old.schema_version == old.plan.schema_version == 3
    plan = replace(old.plan, schema_version=SCHEMA_VERSION)
    assert replace(old, plan=plan, schema_version=SCHEMA_VERSION) == auto_session()


def test_schema_4_leaves_out_defaults_and_writes_stats_and_ops_compactly() -> None:
    text = auto_session().to_json()
    data = json.loads(text)
    assert "\n" not in text and '": ' not in text  # no whitespace
    record = data["records"][0]  # fc1: two ops, one allocating; no device time, no aliases
    assert record["self_cpu_us"] == [520.0, 468.0, 572.0]  # [median, min, max]
    assert record["ops"] == {
        "name": ["aten::addmm", "aten::t"],
        "calls": [3, 3],
        "self_cpu_us": [500.0, 20.0],
        "total_cpu_us": [550.0, 30.0],
        "self_cpu_mem": [4096, 0],
        "cpu_mem": [4096, 0],
    }
    assert "self_device_us" not in record and "aliases" not in record
    assert "backward" not in data and "warnings" not in data
    assert len(text) < len(SCHEMA_3_FILE.read_text()) / 2


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["records"][0].update(bogus=1), "ModuleRecord has an unknown field 'bogus'"),
        (lambda d: d.update(extra=[]), "ProfileSession has an unknown field 'extra'"),
        (
            lambda d: d["records"][0]["ops"].update(calls=[1]),
            r"records\[0\]\.ops: column 'calls' of OpStat holds 1 values, column 'name' 2",
        ),
        (lambda d: d["records"][0]["ops"].update(flops=[1, 2]), "unknown column 'flops'"),
        (lambda d: d["records"][0]["ops"].pop("name"), "missing column 'name'"),
        (lambda d: d["records"][0]["ops"].update(calls=[1, "2"]), "expected int, got str"),
        (lambda d: d["records"][0].update(self_cpu_us=[1.0, 2.0]), "expected a Stat"),
        (lambda d: d["records"][0].update(self_cpu_us=[1.0, True, 3]), "got bool"),
    ],
)
def test_malformed_schema_4_fields_are_corrupt(mutate: object, message: str) -> None:
    data = json.loads(auto_session().to_json())
    mutate(data)  # type: ignore[operator]
    with pytest.raises(SessionFileError, match=message):
        ProfileSession.from_json(json.dumps(data))


def test_a_schema_1_session_still_loads() -> None:
    data = json.loads(SCHEMA_3_FILE.read_text())
    data["schema_version"] = 1
    for key in ("stability", "requested_warmup", "stop_reason", "max_time_s"):
        del data[key]
    for record in data["records"]:
        del record["per_iteration"]
    old = ProfileSession.from_json(json.dumps(data))
    assert old.stability is None
    assert old.schema_version == 1
    assert all(r.per_iteration is None for r in old.records)
    assert "fc1" in render_html(old) and "Noisy timings" not in render_html(old)
    assert "fc1" in render_text_report(old) and "±" not in render_text_report(old)


def corrupt(mutate: object) -> str:
    data = json.loads(with_series(small_session()).to_json())
    mutate(data)  # type: ignore[operator]
    return json.dumps(data)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["records"][0]["per_iteration"].update(self_cpu_us="1 2"), "do not hold 3"),
        (lambda d: d["records"][0]["per_iteration"].update(self_cpu_us=[1, 2, 3]), "expected"),
        (lambda d: d["records"][0]["per_iteration"].update(self_cpu_us="1 x 3"), "not a number"),
        (lambda d: d["stability"].update(verdict="fine"), "expected one of"),
        (lambda d: d["stability"].pop("advice"), "missing field 'advice'"),
        (lambda d: d.update(stop_reason="bored"), "expected one of"),
        (lambda d: d.update(requested_iterations="many"), "expected"),
    ],
)
def test_malformed_schema_3_fields_are_corrupt(mutate: object, message: str) -> None:
    with pytest.raises(SessionFileError, match=message):
        ProfileSession.from_json(corrupt(mutate))


def test_schema_6_round_trips_the_cpu_waits_and_older_files_have_none() -> None:
    waits = CpuWaits("schedstat", 2.0, excluded=3, excluded_wait_us=4100.0, kept_wait_us=(0.0, 5.5))
    stability = Stability("noisy", 0.1, 1.5, 2, "other work", threads_exceed_free_cores=True)
    session = replace(auto_session(), cpu_waits=waits, stability=stability)
    back = ProfileSession.from_json(session.to_json())
    assert back.cpu_waits == waits and back.stability == stability
    older = json.loads(session.to_json())
    del older["cpu_waits"]
    older["schema_version"] = 5
    del older["stability"]["threads_exceed_free_cores"]
    loaded = ProfileSession.from_json(json.dumps(older))
    assert loaded.cpu_waits is None and loaded.stability is not None
    assert not loaded.stability.threads_exceed_free_cores
