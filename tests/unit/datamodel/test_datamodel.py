"""The JSON contract between planner, runtime and reporters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridprof.datamodel import (
    SCHEMA_VERSION,
    CompatChoice,
    Environment,
    Finding,
    FindingKind,
    ModuleRecord,
    ModuleTarget,
    OpStat,
    ProfilePlan,
    ProfileSession,
    SourceSpan,
    Stat,
)
from hybridprof.errors import SessionFileError


def make_session() -> ProfileSession:
    plan = ProfilePlan(
        root_class="Net",
        targets=(
            ModuleTarget("", "Net", "m.Net", 0, False, False, "not a leaf"),
            ModuleTarget(
                "fc",
                "Linear",
                "torch.nn.Linear",
                1,
                True,
                True,
                "leaf",
                aliases=("head",),
                expected_calls=1,
                source=SourceSpan("m.py", 7, 8),
            ),
        ),
        compat=(CompatChoice("profiler_device_arg", "use_device", "2.13 has it"),),
        findings=(Finding(FindingKind.ALIAS, "fc", "also reachable as head"),),
    )
    record = ModuleRecord(
        "fc",
        "Linear",
        3,
        Stat.of([1.0, 2.0, 9.0]),
        Stat.of([2.0, 3.0, 10.0]),
        self_device_us=None,
        ops=(OpStat("aten::addmm", 1, 1.5, 2.5, cpu_mem=-512),),
        output_shapes=("2x4",),
    )
    env = Environment("0.1.0", "2.13.0", "3.11.7", "Linux", "x86", 1, "cpu")
    return ProfileSession(
        plan=plan,
        environment=env,
        records=(record,),
        strategy="session",
        iteration_cpu_us=(3.0, 4.0),
        warnings=("w",),
    )


def test_session_round_trips_through_json() -> None:
    session = make_session()
    assert ProfileSession.from_json(session.to_json()) == session


def test_plan_round_trips_and_answers_queries() -> None:
    plan = make_session().plan
    again = ProfilePlan.from_json(plan.to_json())
    assert again == plan
    assert again.selected_paths() == ("fc",)
    assert again.compat_value("profiler_device_arg") == "use_device"
    assert again.target("fc") is not None and again.target("nope") is None


def test_stat_of_takes_median_min_max() -> None:
    assert Stat.of([5.0, 1.0, 3.0]) == Stat(3.0, 1.0, 5.0)
    assert Stat.of([1.0, 2.0, 3.0, 10.0]) == Stat(2.5, 1.0, 10.0)
    assert Stat.of([]) == Stat(0.0, 0.0, 0.0)


def test_newer_schema_is_refused_with_upgrade_hint() -> None:
    data = json.loads(make_session().to_json())
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SessionFileError, match="newer than this hybridprof reads"):
        ProfileSession.from_json(json.dumps(data))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not a JSON file"),
        ('{"kind": "hybridprof-plan", "schema_version": 1}', "not a hybridprof-session file"),
        ("[1, 2]", "not a hybridprof-session file"),
        ('{"kind": "hybridprof-session", "schema_version": 1}', "corrupt"),
    ],
)
def test_foreign_or_corrupt_files_are_refused(text: str, message: str) -> None:
    with pytest.raises(SessionFileError, match=message):
        ProfileSession.from_json(text)


def test_wrong_field_type_is_corrupt() -> None:
    data = json.loads(make_session().to_json())
    data["records"][0]["calls"] = "three"
    with pytest.raises(SessionFileError, match="corrupt"):
        ProfileSession.from_json(json.dumps(data))


@pytest.mark.parametrize("version", ["1", 0, True, None])
def test_schema_version_must_be_a_positive_integer(version: object) -> None:
    data = json.loads(make_session().to_json())
    data["schema_version"] = version
    with pytest.raises(SessionFileError, match="is not a positive integer"):
        ProfileSession.from_json(json.dumps(data))


def test_loading_names_the_file_and_refuses_folders(tmp_path: Path) -> None:
    from hybridprof.files.storage import load_session

    bad = tmp_path / "s.json"
    bad.write_text("{")
    with pytest.raises(SessionFileError, match=r"s\.json: not a JSON file"):
        load_session(bad)
    with pytest.raises(SessionFileError, match="is a folder"):
        load_session(tmp_path)
    good = tmp_path / "ok.json"
    good.write_text(make_session().to_json())
    assert load_session(good) == make_session()


def test_finding_kinds_are_saved_as_their_names_and_checked_on_load() -> None:
    plan = make_session().plan
    data = json.loads(plan.to_json())
    assert data["findings"][0]["kind"] == "alias"
    loaded = ProfilePlan.from_json(plan.to_json()).findings[0]
    assert loaded.kind is FindingKind.ALIAS
    data["findings"][0]["kind"] = "compat"  # never a kind the planner makes
    with pytest.raises(SessionFileError, match="corrupt"):
        ProfilePlan.from_json(json.dumps(data))


def test_every_finding_kind_has_a_heading_and_prints_as_its_name() -> None:
    headings = [kind.heading for kind in FindingKind]
    assert all(headings) and len(set(headings)) == len(headings)
    assert f"{FindingKind.OPAQUE}" == str(FindingKind.OPAQUE) == "opaque"
