"""`hybridprof run --fsdp` under torchrun (gloo, CPU): the entry's model sharded per unit (each
block of its ModuleList, then the root), profiled as a sharded with-block is, merged on rank 0
with each unit's wait and the rank waited for; the gradients of every step bitwise those of the
same sharded loop without hybridprof, and the model left sharded but unpatched.

Two torchrun runs: two ranks with the default units (tests/fixtures/fsdp_run.py, rank 1 late by
20 ms in blocks.1), and one rank through the fixture's `--fsdp-wrap` function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.files.storage import load_session
from tests.paths import FIXTURES

MODEL = str(FIXTURES / "fsdp_run.py")
QUICK = ["--backward", "--warmup", "1", "--iters", "4", "--threads", "1"]
FORWARD = ["--warmup", "1", "--iters", "3", "--threads", "1"]
UNITS = ["", "blocks.0", "blocks.1", "blocks.2", "blocks.3"]

pytestmark = pytest.mark.slow


def torchrun(
    ranks: int, args: list[str], cwd: Path, steps: list[str] = QUICK
) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    argv += [str(ranks), "-m", "hybridprof", "run", MODEL, *steps, *args, "--out-dir", "out"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=400)


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fsdp-run")
    done = torchrun(2, ["--fsdp"], folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Waited for" in done.stdout
    return folder


@pytest.mark.parametrize("rank", [0, 1])
def test_every_step_has_the_plain_loops_gradients_and_the_model_is_unpatched(
    fsdp_run: Path, rank: int
) -> None:
    facts = json.loads((fsdp_run / f"facts-rank{rank}.json").read_text())
    assert facts["units"] == UNITS and facts["steps"] >= 5  # warm-up and the 4 measured
    assert facts["bitwise_equal"] and facts["forward_is_class_attr"] and facts["sharded"]


def test_each_unit_has_its_collectives_and_rank_1_is_the_one_waited_for(fsdp_run: Path) -> None:
    merged = load_session(fsdp_run / "out" / "session-merged.json")
    assert sorted({c.path for c in merged.fsdp}) == UNITS
    gather = next(c for c in merged.fsdp if (c.path, c.kind) == ("blocks.2", "all_gather"))
    assert gather.nbytes > 0 and gather.waited_for == 1, gather
    assert gather.wait_us[0] > 10_000 > gather.wait_us[1], gather  # rank 0 waited ~20 ms
    rank0 = load_session(fsdp_run / "out" / "session-rank0.json")
    assert rank0.rank is not None and len(rank0.rank.comm_us) == rank0.iterations == 4
    assert all(us > 0 for us in rank0.rank.comm_us)  # the units' collectives, per step


def test_a_users_wrap_function_shards_instead(tmp_path: Path) -> None:
    done = torchrun(1, ["--fsdp-wrap", f"{MODEL}:wrap"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads((tmp_path / "facts-rank0.json").read_text())
    assert facts["units"] == UNITS and facts["sharded"] and facts["bitwise_equal"]
    session = load_session(tmp_path / "out" / "session-rank0.json")
    assert {c.path for c in session.fsdp} == set(UNITS)  # one rank: reduce-scatters, no gathers


def test_a_forward_alone_shows_each_units_gathers_in_its_row(tmp_path: Path) -> None:
    """No backward: the forward's events are read by the array passes unless FSDP2's ranges are
    there, which need the walk (each unit's gathers to its row, none outside)."""
    done = torchrun(2, ["--fsdp"], tmp_path, FORWARD)
    assert done.returncode == 0, done.stderr[-3000:]
    session = load_session(tmp_path / "out" / "session-rank0.json")
    gathers = {c.path: c for c in session.fsdp if c.kind == "all_gather"}
    assert sorted(gathers) == UNITS[1:]  # the root keeps its parameters after its forward
    assert all(c.nbytes > 0 and c.time_us.median > 0 for c in gathers.values())
    assert not [op.name for op in session.outside_ops if op.name.startswith(("FSDP", "c10d"))]
    records = {r.path: r for r in session.records}
    for path, gather in gathers.items():  # the gather is the unit's own time
        assert records[path].self_cpu_us.median > 0.9 * gather.time_us.median, path
