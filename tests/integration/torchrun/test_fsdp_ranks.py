"""FSDP2 over two ranks (torchrun, gloo, CPU): a `Profile` with-block around a sharded training
loop gives each unit's row its gathers and reduce-scatters, and the block with 8x the parameters
ranks first in gathered bytes (exact) and in all-gather time on both ranks.

One torchrun run in all (tests/fixtures/fsdp_train.py, 6 steps of a 4-block model on each rank,
trained once without hybridprof, once with it, and once with the leaves alone profiled).
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
from hybridprof.datamodel import ProfileSession
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


def fsdp_outside_us(session: ProfileSession) -> float:
    """The self time of FSDP2's ranges and collectives left in the outside row."""
    names = ("FSDP", "c10d")
    return sum(op.self_cpu_us for op in session.outside_ops if op.name.startswith(names))


def outside_of_each_step(session: ProfileSession) -> list[float]:
    """Per step, what the rows (each layer's forward and backward self time, the optimizer's)
    leave of the step: the outside row's time in it. Fails if the rows hold more than the step
    (time counted twice)."""
    assert session.optimizer is not None and session.optimizer.per_iteration is not None
    optimizer = session.optimizer.per_iteration.values
    left = []
    for i, step in enumerate(session.iteration_cpu_us):
        own = sum(
            s.self_cpu_us.values[i]
            + (s.backward_self_cpu_us.values[i] if s.backward_self_cpu_us else 0.0)
            for s in (r.per_iteration for r in session.records)
            if s is not None
        )
        assert own + optimizer[i] <= step * (1 + 1e-6)  # nothing counted twice
        left.append(step - own - optimizer[i])
    return left


def unit_self_and_comm_of_each_step(
    session: ProfileSession, unit: str
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Per step, the unit's forward self time beside its gathers and copy-out, and its backward
    self time beside its re-gather and reduce-scatter."""
    record = next(r for r in session.records if r.path == unit)
    steps = record.per_iteration
    assert steps is not None and steps.backward_self_cpu_us is not None
    comm = {c.kind: c.iteration_us for c in session.fsdp if c.path == unit}
    none = (0.0,) * len(steps.self_cpu_us.values)

    def summed(*kinds: str) -> list[float]:
        return [sum(parts) for parts in zip(*(comm.get(kind, none) for kind in kinds), strict=True)]

    forward = list(zip(steps.self_cpu_us.values, summed("all_gather", "copy_out"), strict=True))
    backward_comm = summed("regather", "reduce_scatter")
    backward = list(zip(steps.backward_self_cpu_us.values, backward_comm, strict=True))
    return forward, backward


@pytest.mark.parametrize("rank", [0, 1])
def test_the_units_communication_moves_from_the_outside_row_to_their_rows(
    ranks: Path, rank: int
) -> None:
    """The same training profiled twice. The leaves alone (no unit selected: every selection
    was so before FSDP2's ranges moved to the units they serve): the gathers and reduce-scatters
    FSDP2 runs in the units' hooks are in the outside row, most of the step. The default
    selection (the leaves and the units): each unit's row holds its gathers in its forward time
    and its re-gather and reduce-scatter in its backward time, the outside row none of them. In
    both, each step's rows add up to the step: the time changed owner, it was not made up."""
    before = load_session(ranks / f"session-leaves-rank{rank}.json")
    after = load_session(ranks / f"session-rank{rank}.json")
    assert not {"", *UNITS} & {r.path for r in before.records}
    assert before.outside_cpu_us is not None and after.outside_cpu_us is not None
    comm_before = sum(c.time_us.median for c in before.fsdp)
    # the outside row holds the units' hook time: FSDP2's ranges and collectives, and the copies
    # and cats they run (their own rows in the outside ops: about half the ranges' time quiet,
    # more under load, so the ranges' self time alone is no bound)
    assert before.outside_cpu_us.median > 0.8 * comm_before, (before.outside_cpu_us, comm_before)
    assert fsdp_outside_us(before) > 0.2 * comm_before, (fsdp_outside_us(before), comm_before)
    assert fsdp_outside_us(after) == 0.0, after.outside_ops
    step_before = statistics.median(before.iteration_cpu_us)
    step_after = statistics.median(after.iteration_cpu_us)
    assert before.outside_cpu_us.median > 0.5 * step_before
    assert after.outside_cpu_us.median < 0.05 * step_after
    # FSDP2 may run a unit's gather inside another unit's window (the root's, mostly), so one
    # step's unit can hold less than its own communication (blocks.2's forward: 0.49-0.98x of
    # it in 6 quiet steps), but the units together hold all of it in every step, and each unit
    # holds its own in a typical step (the median of its steps' ratios)
    held = {unit: unit_self_and_comm_of_each_step(after, unit) for unit in ("", *UNITS)}
    for step in range(len(after.iteration_cpu_us)):
        own = sum(f[step][0] + b[step][0] for f, b in held.values())
        comm = sum(f[step][1] + b[step][1] for f, b in held.values())
        assert own > 0.95 * comm, (step, own, comm)
    for unit, (forward, backward) in held.items():
        for pairs in (forward, backward):
            assert statistics.median(own / comm for own, comm in pairs) > 0.8, (unit, pairs)
    for session in (before, after):
        left = outside_of_each_step(session)
        assert session.outside_cpu_us is not None
        assert statistics.median(left) == pytest.approx(session.outside_cpu_us.median, abs=1.0)
