"""FSDP2 over two ranks (torchrun, gloo, CPU) with rank 1 late by a 20 ms sleep in `blocks.1`'s
forward: merged, rank 0 waits about 20 ms at the next collective, `blocks.2`'s all-gather,
named with that unit and with rank 1 as the rank it waited for; each rank's own session says how
much of each unit's communication was exposed (on CPU nearly all of it).

One torchrun run (tests/fixtures/fsdp_wait.py: 5 steps of a 4-block model inside a `Profile`
with-block on each rank), merged with `hybridprof merge`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.cli import main
from hybridprof.files.storage import load_session
from tests.paths import FIXTURES

pytestmark = pytest.mark.slow
UNITS = ("blocks.0", "blocks.1", "blocks.2", "blocks.3")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fsdp-wait")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += [str(FIXTURES / "fsdp_wait.py"), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_rank_0_waits_at_the_next_units_gather_for_rank_1(ranks: Path, capsys) -> None:
    sessions = [str(ranks / f"session-rank{rank}.json") for rank in (0, 1)]
    merged_file = ranks / "merged.json"
    assert main(["merge", *sessions, "-o", str(merged_file)]) == 0
    assert "Waited for" in capsys.readouterr().out
    merged = load_session(merged_file)
    gather = next(c for c in merged.fsdp if (c.path, c.kind) == ("blocks.2", "all_gather"))
    assert 15_000 < gather.wait_us[0] < 40_000, gather  # rank 0 waited ~20 ms
    assert gather.wait_us[1] < 5_000 and gather.waited_for == 1
    rows = {row.path: row for row in layer_table(merged).rows if row.comm}
    waits = {path: rows[path].wait_us for path in UNITS}
    assert max(waits, key=lambda path: waits[path] or 0.0) == "blocks.2", waits
    assert rows["blocks.2"].waited_for == 1
    assert all((waits[p] or 0.0) < 10_000 for p in UNITS if p != "blocks.2"), waits
    assert merged.ranks is not None  # the Ranks section: rank 0 waited, rank 1 made it wait
    waiting = [r.waiting_us for r in merged.ranks.ranks]
    assert waiting[0] > waiting[1] + 10_000, waiting
    assert all(0 < r.comm_share < 1 for r in merged.ranks.ranks)


@pytest.mark.parametrize("rank", [0, 1])
def test_on_cpu_nearly_all_of_a_gather_is_exposed(ranks: Path, rank: int) -> None:
    session = load_session(ranks / f"session-rank{rank}.json")
    assert session.rank is not None and session.rank.info.rank == rank
    for comm in session.fsdp:
        assert len(comm.iteration_us) == session.iterations
        assert comm.exposed_us is not None and comm.exposed_us.median <= comm.time_us.median
        if comm.kind in ("all_gather", "regather"):
            assert comm.exposed_us.median > 0.5 * comm.time_us.median, comm
