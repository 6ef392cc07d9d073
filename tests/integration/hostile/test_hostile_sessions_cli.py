"""Session files a renderer cannot draw are refused with one line, before any output is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli_run import hybridprof
from tests.sessions import small_session


def _edited(**change: object) -> str:
    data = json.loads(small_session().to_json())
    for where, value in change.items():
        record, field = where.split("__")
        data["records"][int(record[1:])][field] = value
    return json.dumps(data)


HOSTILE = {
    "nan": (
        _edited(r0__self_cpu_us={"median": "NaN", "min": 0.0, "max": 1.0}).replace('"NaN"', "NaN"),
        "NaN is not a number hybridprof writes",
    ),
    "infinity": (
        _edited(r1__calls=0).replace('"calls": 0', '"calls": Infinity'),
        "Infinity is not a number hybridprof writes",
    ),
    "huge": (
        _edited(r0__self_cpu_us={"median": 1e308, "min": 0.0, "max": 1e308}),
        "the number 1e+308 at records[0].self_cpu_us",
    ),
    "deep": ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
    "long text": (
        _edited(r0__path="x" * 300_000),
        "a text of 300,000 characters at records[0].path",
    ),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_session_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    text, said = HOSTILE[name]
    (tmp_path / "s.json").write_text(text)
    for output in ("r.html", "r.csv", "r.pdf"):
        done = hybridprof("report", "s.json", "-o", output, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines
        assert lines[0].startswith("hybridprof: error: s.json: ")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
