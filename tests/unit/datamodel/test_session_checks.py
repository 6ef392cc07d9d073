"""A session file holding values of the right type that no run produces (a memory timeline whose
series differ in length, a negative peak, compile time or count, a schedule measuring no step)
is refused when loaded, in one line naming the field, instead of rendering nonsense or failing
inside a report."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import SessionFileError

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def saved() -> dict[str, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    session = hybridprof.profile(
        model, torch.randn(2, 4), warmup=1, iters=2, backward=True, profile_memory=True
    )
    data: dict[str, Any] = json.loads(session.to_json())
    data["compiled"] = {"backend": "inductor", "compile_s": 1.5, "frames": 1, "graphs": 2}
    data["schedule"] = {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}
    data["steps"] = 4
    data["fsdp"] = [{"path": "0", "kind": "all_gather", "calls": 1, "time_us": [5, 4, 6]}]
    return data


def device(data: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = data["memory"]["devices"][0]
    return first


def shorten(key: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        timeline = device(data)["timeline"]
        timeline[key] = " ".join(timeline[key].split()[:-1])

    return edit


def empty(key: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        device(data)["timeline"][key] = ""

    return edit


def put(path: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        holder: Any = data
        for part in parents:
            holder = holder[int(part)] if part.isdigit() else holder[part]
        holder[last] = value

    return edit


def test_the_saved_session_loads_as_written(saved: dict[str, Any]) -> None:
    session = ProfileSession.from_json(json.dumps(saved))
    assert session.memory is not None and session.memory.devices[0].timeline is not None
    assert session.fsdp[0].time_us.median == 5 and session.fsdp[0].nbytes == 0


BROKEN: dict[str, tuple[Edit, str]] = {
    "time_us one short": (shorten("time_us"), "memory.devices[0].timeline"),
    "live_bytes one short": (shorten("live_bytes"), "memory.devices[0].timeline"),
    "live_bytes empty": (empty("live_bytes"), "memory.devices[0].timeline"),
    "both empty": (
        lambda d: (empty("live_bytes")(d), empty("time_us")(d)),
        "memory.devices[0].timeline",
    ),
    "negative step peak": (
        put("memory.devices.0.peak.live_bytes", -1_000_000_000_000),
        "memory.devices[0].peak.live_bytes",
    ),
    "negative peak stat": (
        put("memory.devices.0.peak_live_bytes", [-5.0, -5.0, -5.0]),
        "memory.devices[0].peak_live_bytes",
    ),
    "negative start": (put("memory.devices.0.start_bytes", -1), "memory.devices[0].start_bytes"),
    "negative compile time": (put("compiled.compile_s", -5.0), "compiled.compile_s"),
    "negative graphs": (put("compiled.graphs", -2), "compiled.graphs"),
    "negative frames": (put("compiled.frames", -1), "compiled.frames"),
    "schedule active 0": (put("schedule.active", 0), "schedule.active"),
    "negative schedule wait": (put("schedule.wait", -3), "schedule.wait"),
    "negative steps": (put("steps", -4), "steps"),
    "negative warmup": (put("warmup", -1), "warmup"),
    "negative duration": (put("duration_s", -2.0), "duration_s"),
    "negative gathered bytes": (put("fsdp.0.nbytes", -8), "fsdp[0].nbytes"),
    "negative gather time": (put("fsdp.0.time_us", [5, -4, 6]), "fsdp[0].time_us"),
    "negative exposed time": (put("fsdp.0.exposed_us", [-1, -2, 0]), "fsdp[0].exposed_us"),
    "negative wait": (put("fsdp.0.wait_us", [0, -3]), "fsdp[0].wait_us[1]"),
    "negative rank waited for": (put("fsdp.0.waited_for", -1), "fsdp[0].waited_for"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_an_impossible_value_is_refused_in_one_line(saved: dict[str, Any], case: str) -> None:
    edit, where = BROKEN[case]
    data = json.loads(json.dumps(saved))
    edit(data)
    with pytest.raises(SessionFileError) as refused:
        ProfileSession.from_json(json.dumps(data))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("corrupt hybridprof-session file: ") and where in message, message
    assert message.endswith("write it again with hybridprof"), message


def test_a_refused_timeline_never_reaches_a_report(saved: dict[str, Any]) -> None:
    from hybridprof.reporting import renderer_for

    data = json.loads(json.dumps(saved))
    shorten("live_bytes")(data)
    with pytest.raises(SessionFileError):
        session = ProfileSession.from_json(json.dumps(data))
        renderer_for("r.html").render(session)
