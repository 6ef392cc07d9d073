"""One `hybridprof run` builds each session's layer table once: the printed table, the summary
lines and every report share it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hybridprof.analysis import layer_table as module
from hybridprof.cli import main
from hybridprof.datamodel import ProfileSession
from tests.paths import FIXTURES

SMALL = FIXTURES / "run_small.py"


def test_one_run_builds_the_layer_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: Counter[int] = Counter()
    build = module.build_layer_table
    sessions: list[ProfileSession] = []  # kept alive, so no id is reused meanwhile

    def counted(session: ProfileSession) -> module.LayerTable:
        builds[id(session)] += 1
        sessions.append(session)
        return build(session)

    monkeypatch.setattr(module, "build_layer_table", counted)
    reports = [tmp_path / name for name in ("r.html", "r.txt", "r.csv", "r.json", "r.pdf")]
    argv = ["run", str(SMALL), "--warmup", "0", "--iters", "2", "--profile-memory", "--flops"]
    argv += ["--peak-gflops", "10", "--peak-gbps", "1", "-o", str(tmp_path / "s.json")]
    for report in reports:
        argv += ["--report", str(report)]
    assert main(argv) == 0
    assert all(report.stat().st_size > 0 for report in reports)
    assert len(builds) == 1 and list(builds.values()) == [1]
