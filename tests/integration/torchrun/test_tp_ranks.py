"""Tensor parallel over two ranks (torchrun, gloo, CPU): a `Profile` with-block around a loop
training two MLPs made tensor parallel (each `up` column parallel, each `down` row parallel) gives
each sharded Linear's row its collectives: bytes, time and group, apart from its compute, and no
communication is left in the outside row.

One torchrun run of a with-block (tests/fixtures/tp_train.py, 8 steps on each rank, trained once
without hybridprof and once with it), and one of `hybridprof run --backward` on a model file
(tests/fixtures/tp_net.py), whose merged session keeps each layer's collectives.
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
from hybridprof.analysis.rank_merge import merged_unit_comm
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session
from hybridprof.reporting.text.text_report import render_text_report
from tests.paths import FIXTURES

pytestmark = pytest.mark.slow
COMM_OPS = ("_c10d_functional::", "c10d::", "gloo:", "Redistribute", "NestedRedistribute")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += [str(FIXTURES / "tp_train.py"), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def session_of(out: Path, rank: int) -> ProfileSession:
    return load_session(out / f"session-rank{rank}.json")


def rows_of(session: ProfileSession) -> dict[str, LayerRow]:
    return {row.path: row for row in layer_table(session).rows}


@pytest.mark.parametrize("rank", [0, 1])
def test_each_row_parallel_linear_has_its_all_reduce_apart_from_its_compute(
    ranks: Path, rank: int
) -> None:
    facts = json.loads((ranks / f"rank{rank}.json").read_text())
    rows = rows_of(session_of(ranks, rank))
    for down in ("mlps.0.down", "mlps.1.down"):
        row = rows[down]
        sent = row.comm_of("tp_forward")
        assert sent is not None, down
        assert (sent.calls, sent.nbytes) == (1, facts["all_reduce_bytes"])  # 8 x 32 x 4 bytes
        assert sent.group == "mesh dim tp, group default_pg"
        assert sent.time_us.median > 0
        assert row.self_cpu is not None and row.compute_us is not None
        assert row.compute_us == pytest.approx(row.self_cpu.median - sent.time_us.median)
        assert row.comm_of("tp_backward") is None  # a replicated gradient: nothing to reduce
    for up in ("mlps.0.up", "mlps.1.up"):
        assert rows[up].comm_of("tp_forward") is None  # column parallel: a replicated input
    assert rows["mlps.0.up"].comm_of("tp_backward") is None  # its input is data: no gradient
    grad = rows["mlps.1.up"].comm_of("tp_backward")  # its input's gradient, summed over ranks
    assert grad is not None and (grad.calls, grad.nbytes) == (1, facts["all_reduce_bytes"])


@pytest.mark.parametrize("rank", [0, 1])
def test_no_communication_is_outside_and_each_steps_rows_add_up_to_it(
    ranks: Path, rank: int
) -> None:
    """Each step's rows (layers forward and backward, the optimizer, and the outside row's time
    of that step: what is left) add up to the step, none counted twice, and the outside row holds
    no communication: without the hooks' ranges and the waits moved to the layers they serve,
    it held 60% of the step here (gloo's all-reduces, DTensor's redistributions, the waits)."""
    session = session_of(ranks, rank)
    outside = [op.name for op in session.outside_ops if op.name.startswith(COMM_OPS)]
    assert not outside, outside
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
    assert statistics.median(left) <= 0.15 * statistics.median(session.iteration_cpu_us)


def test_the_text_report_and_the_rank_merge_keep_each_layers_collectives(ranks: Path) -> None:
    sessions = [session_of(ranks, 0), session_of(ranks, 1)]
    text = render_text_report(sessions[0])
    assert "TP comm" in text and "Compute" in text and "mesh dim tp" in text
    merged = {(c.path, c.kind): c for c in merged_unit_comm([s.tp for s in sessions])}
    down = merged[("mlps.1.down", "tp_forward")]
    assert down.nbytes == 8 * 32 * 4 and down.group == "mesh dim tp, group default_pg"
    assert ("mlps.1.up", "tp_backward") in merged and ("mlps.0.up", "tp_forward") not in merged


def test_hybridprof_run_gives_each_layer_its_collectives_and_merges_them(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += ["-m", "hybridprof", "run", str(FIXTURES / "tp_net.py"), "--backward", "--iters", "3"]
    argv += ["--out-dir", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    merged = load_session(tmp_path / "session-merged.json")
    rows = rows_of(merged)
    for down in ("0.down", "1.down"):
        sent = rows[down].comm_of("tp_forward")
        assert sent is not None and sent.nbytes == 8 * 32 * 4, down
        assert rows[down].compute_us is not None
    assert rows["1.up"].comm_of("tp_backward") is not None
    assert rows["0.up"].comm_of("tp_forward") is None
    layers = {c.layer for c in merged.collectives if c.name.startswith("tensor parallel")}
    assert layers == {"0.down", "1.down", "1.up"}  # the Ranks section lists each layer's
    assert "TP comm" in done.stdout


@pytest.mark.parametrize("rank", [0, 1])
def test_training_is_bitwise_the_same_and_the_model_as_it_was(ranks: Path, rank: int) -> None:
    facts = json.loads((ranks / f"rank{rank}.json").read_text())
    assert facts["world_size"] == 2
    assert facts["bitwise_equal"] and facts["model_unchanged"] and facts["forward_is_class_attr"]
