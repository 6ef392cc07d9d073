"""A session, plan or comparison file that does not fit is refused in one line that says where:
values of the wrong type name their field, texts that are no valid Unicode are refused, and what
hybridprof writes it reads back."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from hybridprof.datamodel import OpStat, ProfilePlan, ProfileSession
from hybridprof.datamodel.jsonbounds import MAX_TEXT
from hybridprof.diff import DiffResult, diff_sessions
from hybridprof.errors import SessionFileError
from tests.sessions import small_session


def _session_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(small_session().to_json())
    return data


def _set(*where: str | int, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in where[:-1]:
            node = node[key]  # type: ignore[index]
        node[where[-1]] = value  # type: ignore[index]

    return edit


WRONG_TYPES = {
    "records[1].calls": _set("records", 1, "calls", value="2"),
    "iterations": _set("iterations", value="x"),
    "environment.threads": _set("environment", "threads", value=[1]),
    "plan.targets[0].depth": _set("plan", "targets", 0, "depth", value="0"),
    "stability.verdict": _set("stability", "verdict", value=5),
    "records[0].ops.calls[1]": _set("records", 0, "ops", "calls", 1, value="x"),
    "records[1].self_cpu_us": _set("records", 1, "self_cpu_us", value={"a": 1}),
    "plan": _set("plan", value=[]),
}


@pytest.mark.parametrize("where", WRONG_TYPES)
def test_a_value_of_the_wrong_type_is_refused_naming_where_it_is(where: str) -> None:
    data = _session_data()
    data["stability"] = {"verdict": "stable", "iteration_cv": 0.0, "load": 0, "threads": 1,
                         "advice": ""}  # fmt: skip
    WRONG_TYPES[where](data)
    with pytest.raises(SessionFileError) as caught:
        ProfileSession.from_json(json.dumps(data))
    message = str(caught.value)
    assert message.startswith(f"corrupt hybridprof-session file: {where}: "), message
    assert message.endswith("; write it again with hybridprof")


def test_a_plan_and_a_comparison_name_the_field_too() -> None:
    plan = json.loads(small_session().plan.to_json())
    plan["targets"][1]["selected"] = "yes"
    with pytest.raises(SessionFileError, match=r"plan file: targets\[1\]\.selected: expected bool"):
        ProfilePlan.from_json(json.dumps(plan))
    diff = json.loads(diff_sessions(small_session(), small_session()).to_json())
    diff["threshold_pct"] = "5"
    with pytest.raises(SessionFileError, match=r"diff file: threshold_pct: expected a number"):
        DiffResult.from_json(json.dumps(diff))


def test_a_bad_value_is_quoted_short() -> None:
    data = _session_data()
    data["stop_reason"] = "x" * 100_000  # a Literal field: the value is shown in the error
    with pytest.raises(SessionFileError) as caught:
        ProfileSession.from_json(json.dumps(data))
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udbff"])
@pytest.mark.parametrize("where", ["path", "class_name"])
def test_a_lone_surrogate_is_refused_naming_where_it_is(text: str, where: str) -> None:
    data = _session_data()
    data["records"][1][where] = text  # json.dumps writes it as a \ud800 escape: valid JSON
    with pytest.raises(SessionFileError) as caught:
        ProfileSession.from_json(json.dumps(data))
    message = str(caught.value)
    assert message.startswith(f"corrupt hybridprof-session file: the text at records[1].{where} ")
    assert "lone surrogate" in message
    message.encode("utf-8")  # the error itself can be printed


def test_a_lone_surrogate_anywhere_is_refused_and_a_pair_is_a_character() -> None:
    data = _session_data()
    data["warnings"] = ["ok", {"\ud800": 1}]
    with pytest.raises(SessionFileError, match=r"the text at warnings\[1\]\.'\\ud800' holds"):
        ProfileSession.from_json(json.dumps(data))
    data["warnings"] = ["an emoji \U0001f600 is a surrogate pair in JSON"]
    session = ProfileSession.from_json(json.dumps(data))  # \ud83d\ude00: one valid character
    assert session.warnings == ("an emoji \U0001f600 is a surrogate pair in JSON",)


def test_what_hybridprof_writes_it_reads_back() -> None:
    # an op name from record_function has no bound at the source: it is cut when written
    session = small_session()
    huge = OpStat("x" * (3 * MAX_TEXT), 1, 1.0, 1.0)
    record = replace(session.records[0], ops=(huge,))
    session = replace(session, records=(record, *session.records[1:]), warnings=("w" * 200_000,))
    again = ProfileSession.from_json(session.to_json())
    assert again.records[0].ops[0].name == "x" * (MAX_TEXT - 1) + "\u2026"
    assert again.warnings == ("w" * (MAX_TEXT - 1) + "\u2026",)
    assert session.records[0].ops[0].name == "x" * (3 * MAX_TEXT)  # the session is left alone
