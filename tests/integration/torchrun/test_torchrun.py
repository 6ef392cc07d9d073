"""`hybridprof run` under a real `torchrun --nproc-per-node 2` (gloo, CPU), as a user runs it.

Two torchrun runs in all (each starts three Pythons that import torch; on a shared 2-core machine
that is most of the time): one DDP training run whose layer `1` sleeps 20 ms on rank 1 only (and
whose layer `4` calls dist.all_reduce itself), and one whose layer raises on rank 1 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.files.storage import load_session
from tests.paths import FIXTURES

MODEL = str(FIXTURES / "ranked_net.py")
QUICK = ["--warmup", "1", "--iters", "4", "--threads", "1"]

pytestmark = pytest.mark.slow


def torchrun(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 240):
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv += ["-m", "hybridprof", "run", MODEL, *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    folder = tmp_path_factory.mktemp("ddp")
    options = ["--entry", "build_sleepy", "--backward", "--ddp", "--profile-memory", *QUICK]
    done = torchrun([*options, "--out-dir", "out"], folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "out", done


def test_each_rank_saves_its_session_and_rank0_the_merged_one(ddp_run) -> None:
    out, done = ddp_run
    assert sorted(p.name for p in out.iterdir()) == [
        "report.html",
        "session-merged.json",
        "session-rank0.json",
        "session-rank1.json",
    ]
    for rank in (0, 1):
        session = load_session(out / f"session-rank{rank}.json")
        assert session.rank is not None
        info = session.rank.info
        assert (info.rank, info.world_size, info.local_rank) == (rank, 2, rank)
        assert (info.backend, info.device, info.ddp) == ("gloo", "cpu", True)
        assert info.host
        assert len(session.rank.step_us) == session.iterations == 4
    assert "ranks: 2" in done.stdout and "merged: out/session-merged.json" in done.stdout


def test_every_layer_has_figures_for_both_ranks(ddp_run) -> None:
    out, _ = ddp_run
    merged = load_session(out / "session-merged.json")
    assert merged.ranks is not None and merged.ranks.world_size == 2
    selected = set(merged.plan.selected_paths())
    assert {layer.path for layer in merged.ranks.layers} == selected
    for layer in merged.ranks.layers:
        assert len(layer.rank_us) == 2 and all(us > 0 for us in layer.rank_us), layer
    for rank in (0, 1):
        session = load_session(out / f"session-rank{rank}.json")
        assert {r.path for r in session.records if r.calls} == selected


def test_ddp_all_reduce_buckets_are_rows_of_the_backward(ddp_run) -> None:
    out, _ = ddp_run
    for name in ("session-rank0.json", "session-rank1.json", "session-merged.json"):
        session = load_session(out / name)
        buckets = [c for c in session.collectives if c.kind == "ddp_bucket"]
        assert buckets, name
        # every trainable layer's gradients travel in some bucket; sizes are the gradients'
        carried = {path for c in buckets for path in c.carries}
        assert carried == {"0", "1", "3"}, carried
        assert sum(c.nbytes for c in buckets) == 4 * (16 * 16 + 16 + 16 * 16 + 16 * 4 + 4)
        assert all(c.calls >= 1 and c.time_us.median > 0 for c in buckets)
    merged = load_session(out / "session-merged.json")
    assert all(c.waiting_us is not None for c in merged.collectives if c.kind == "ddp_bucket")
    # layer 4 calls dist.all_reduce in its forward: a row of its own, named after the c10d op
    own = [c for c in merged.collectives if c.kind == "model"]
    assert [(c.name, c.layer) for c in own] == [("c10d::allreduce_", "4")]
    assert merged.ranks is not None
    assert all(0 < r.comm_share <= 1 for r in merged.ranks.ranks)


def test_a_layer_slow_on_rank1_only_is_a_straggler(ddp_run) -> None:
    out, done = ddp_run
    merged = load_session(out / "session-merged.json")
    assert merged.ranks is not None
    flagged = {(s.path, s.rank) for s in merged.ranks.stragglers}
    assert ("1", 1) in flagged
    # layer 4 waits in its own all-reduce for rank 1: slow there, but not a straggler
    assert all(path != "4" for path, _ in flagged)
    layer = next(layer for layer in merged.ranks.layers if layer.path == "1")
    assert layer.slowest_rank == 1 and layer.rank_us[1] > 15_000
    assert any(f.kind == "straggler" and f.path == "1" for f in merged.plan.findings)
    assert "straggler: rank 1 on 1:" in done.stdout
    html = (out / "report.html").read_text()
    assert "Ranks (2)" in html and "chart-rank_steps" in html and "(straggler)" in html


def test_the_merged_view_has_each_ranks_memory_peak(ddp_run) -> None:
    out, _ = ddp_run
    merged = load_session(out / "session-merged.json")
    assert merged.memory is not None
    peaks = merged.memory.rank_peaks
    assert [p.rank for p in peaks] == [0, 1]
    for rank, peak in zip((0, 1), peaks, strict=True):
        session = load_session(out / f"session-rank{rank}.json")
        assert session.memory is not None
        assert peak.peak_live_bytes == session.memory.devices[0].peak.live_bytes > 0
    device = merged.memory.devices[0]
    assert device.peak.live_bytes == max(p.peak_live_bytes for p in peaks)
    assert {m.path for m in device.layers} >= {"0", "1", "3"}
    assert "Peak per rank" in (out / "report.html").read_text()


def test_merge_offline_gives_the_same_merged_view(ddp_run, tmp_path: Path) -> None:
    out, _ = ddp_run
    ranks = [str(out / "session-rank1.json"), str(out / "session-rank0.json")]
    code = main(
        ["merge", *ranks, "-o", str(tmp_path / "m.json"), "--report", str(tmp_path / "m.txt")]
    )
    assert code == 0
    offline = load_session(tmp_path / "m.json")
    online = load_session(out / "session-merged.json")
    assert offline.ranks == online.ranks and offline.records == online.records
    assert (tmp_path / "m.txt").read_text().strip()


def test_merge_refuses_sessions_of_different_world_sizes(ddp_run, tmp_path: Path, capsys) -> None:
    out, _ = ddp_run
    data = json.loads((out / "session-rank1.json").read_text())
    data["rank"]["info"]["world_size"] = 3
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    code = main(
        ["merge", str(out / "session-rank0.json"), str(other), "-o", str(tmp_path / "m.json")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "hybridprof: error: the sessions come from runs of different world sizes (2, 3); "
        "merge the sessions of one torchrun run"
    ]
    assert not (tmp_path / "m.json").exists()


def test_a_rank_that_raises_ends_both_ranks_with_one_line_each(tmp_path: Path) -> None:
    stamp = tmp_path / "failed-at"
    done = torchrun(
        ["--entry", "build_broken", "--backward", "--ddp", *QUICK, "--out-dir", "out"],
        tmp_path,
        env={"FAILED_AT_FILE": str(stamp)},
    )
    assert done.returncode != 0
    assert stamp.exists()  # rank 1 failed in its forward, as the model makes it
    # The other rank was told through the store, not by a collective timing out (which would
    # take gloo's 30 minutes and end the run by torchrun's timeout above, a hang guard).
    assert "timed out" not in done.stderr.lower() and "timeout" not in done.stderr.lower()
    ours = [line for line in done.stderr.splitlines() if line.startswith("hybridprof:")]
    ours.append(done.stderr[-4000:])  # shown when an assertion below fails
    cause = "forward failed in 1 (Broken): ValueError: rank one is broken here"
    # The failing rank says its own error before telling the other rank (which then exits, and
    # torchrun stops the rest), so its line is always there, once; the other rank's line may be
    # cut when torchrun stops it first.
    own = f"hybridprof: error: rank 1: {cause}"
    assert len([line for line in ours[:-1] if line.startswith(own)]) == 1, ours
    seen = [line for line in ours[:-1] if line.startswith("hybridprof: error: rank 1 failed")]
    assert all(line.endswith("(rank 0 stopped)") for line in seen), ours
    assert not (tmp_path / "out" / "session-merged.json").exists()
