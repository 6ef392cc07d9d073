"""`hybridprof run` under torchrun with the nccl backend: one rank per GPU (one rank on a 1-GPU
machine). Skipped without CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hybridprof.files.storage import load_session

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

MODEL = Path(__file__).resolve().parent.parent / "fixtures" / "ranked_net.py"


def test_ddp_training_step_on_every_gpu_with_nccl(tmp_path: Path) -> None:
    ranks = min(torch.cuda.device_count(), 2)
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    argv += ["--nproc-per-node", str(ranks), "-m", "hybridprof", "run", str(MODEL)]
    argv += ["--backward", "--ddp", "--warmup", "2", "--iters", "5", "--out-dir", "out"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in range(ranks):
        session = load_session(tmp_path / "out" / f"session-rank{rank}.json")
        assert session.rank is not None
        info = session.rank.info
        assert (info.backend, info.device, info.ddp) == ("nccl", f"cuda:{rank}", True)
        assert session.use_device
        buckets = [c for c in session.collectives if c.kind == "ddp_bucket"]
        assert buckets and all(c.nbytes > 0 and c.time_us.median > 0 for c in buckets)
    merged = load_session(tmp_path / "out" / "session-merged.json")
    assert merged.ranks is not None and merged.ranks.world_size == ranks
    assert all(len(layer.rank_us) == ranks for layer in merged.ranks.layers)
    assert (tmp_path / "out" / "report.html").is_file()
