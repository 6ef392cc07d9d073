"""FSDP2 over two ranks (torchrun, gloo, CPU): a `Profile` with-block around a sharded training
loop gives each unit's row its gathers and reduce-scatters, and the block with 8x the parameters
ranks first in gathered bytes (exact) and in all-gather time on both ranks.

One torchrun run in all (tests/fixtures/fsdp_train.py, 6 steps of a 4-block model on each rank,
trained once without hybridprof and once with it).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.analysis.layer_table import LayerRow, layer_table
from hybridprof.files.storage import load_session
from tests.paths import FIXTURES

pytestmark = pytest.mark.slow
UNITS = ("blocks.0", "blocks.1", "blocks.2", "blocks.3")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fsdp")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += [str(FIXTURES / "fsdp_train.py"), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def unit_rows(out: Path, rank: int) -> dict[str, LayerRow]:
    table = layer_table(load_session(out / f"session-rank{rank}.json"))
    return {row.path: row for row in table.rows if row.comm}


def gathered(row: LayerRow) -> tuple[int, float]:
    comm = row.comm_of("all_gather")
    assert comm is not None, row.path
    return comm.nbytes, comm.time_us.median


@pytest.mark.parametrize("rank", [0, 1])
def test_the_big_block_ranks_first_in_gathered_bytes_and_time(ranks: Path, rank: int) -> None:
    facts = json.loads((ranks / f"rank{rank}.json").read_text())
    rows = unit_rows(ranks, rank)
    assert set(rows) == {"", *UNITS}  # the root unit ("") holds embed and head
    for unit in UNITS:
        nbytes, _ = gathered(rows[unit])
        assert rows[unit].comm_of("all_gather").calls == 1  # type: ignore[union-attr]
        assert nbytes == facts["param_numel"][unit] * 4  # float32; even sizes: no padding
        scatter = rows[unit].comm_of("reduce_scatter")
        assert scatter is not None and scatter.nbytes == nbytes
        assert rows[unit].comm_of("regather") is not None  # freed after forward, gathered again
    by_bytes = sorted(rows, key=lambda path: gathered(rows[path])[0], reverse=True)
    by_time = sorted(rows, key=lambda path: gathered(rows[path])[1], reverse=True)
    assert by_bytes[0] == by_time[0] == "blocks.2", {p: gathered(r) for p, r in rows.items()}
    assert gathered(rows["blocks.2"])[0] > 7.9 * gathered(rows["blocks.0"])[0]  # ~8x the params


@pytest.mark.parametrize("rank", [0, 1])
def test_training_is_bitwise_the_same_and_the_model_as_it_was(ranks: Path, rank: int) -> None:
    facts = json.loads((ranks / f"rank{rank}.json").read_text())
    assert facts["world_size"] == 2
    assert facts["bitwise_equal"] and facts["model_unchanged"] and facts["forward_is_class_attr"]


@pytest.mark.parametrize("rank", [0, 1])
def test_the_units_communication_is_their_rows_time_and_the_rows_add_up(
    ranks: Path, rank: int
) -> None:
    """Before the FSDP2 ranges moved to the units they serve, the outside row held 90% of the
    step here (the gathers and reduce-scatters of unprofiled units, run in their hooks), and a
    leaf's backward held the next unit's prefetch. Now each unit's row holds its gathers in its
    forward time and its re-gather and reduce-scatter in its backward time, the outside row none,
    and each step's rows still add up to the step."""
    session = load_session(ranks / f"session-rank{rank}.json")
    outside = [op.name for op in session.outside_ops if op.name.startswith(("FSDP", "c10d"))]
    assert not outside, outside
    records = {r.path: r for r in session.records}
    for unit in ("", *UNITS):
        record = records[unit]
        assert record.backward_self_cpu_us is not None
        comm = {c.kind: c.time_us.median for c in session.fsdp if c.path == unit}
        forward = comm.get("all_gather", 0.0) + comm.get("copy_out", 0.0)
        assert record.self_cpu_us.median > 0.9 * forward, (unit, record.self_cpu_us, comm)
        backward = comm.get("regather", 0.0) + comm["reduce_scatter"]
        assert record.backward_self_cpu_us.median > 0.9 * backward, (unit, comm)
    assert session.optimizer is not None and session.optimizer.per_iteration is not None
    assert session.outside_cpu_us is not None
    optimizer = session.optimizer.per_iteration.values
    left = []
    for i, step in enumerate(session.iteration_cpu_us):
        own = sum(
            s.self_cpu_us.values[i] + s.backward_self_cpu_us.values[i]
            for s in (r.per_iteration for r in session.records)
            if s is not None and s.backward_self_cpu_us is not None
        )
        assert own + optimizer[i] <= step * (1 + 1e-6)  # nothing counted twice
        left.append(step - own - optimizer[i])
    assert statistics.median(left) == pytest.approx(session.outside_cpu_us.median, abs=1.0)
    assert statistics.median(left) <= 0.05 * statistics.median(session.iteration_cpu_us)
