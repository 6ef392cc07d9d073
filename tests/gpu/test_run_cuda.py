"""`hybridprof run --device cuda` and the runner's device placement. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.cli import main
from hybridprof.files.storage import load_session

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SMALL = Path(__file__).resolve().parent.parent / "fixtures" / "run_small.py"


def test_cli_forward_and_backward_on_cuda(tmp_path: Path) -> None:
    for extra in ([], ["--backward"]):
        out = tmp_path / f"s{len(extra)}.json"
        argv = ["run", str(SMALL), "--device", "cuda", "--warmup", "2", "--iters", "3"]
        assert main([*argv, *extra, "-o", str(out)]) == 0
        session = load_session(out)
        assert session.use_device and session.environment.device.startswith("cuda:0")
        fc = session.record("features.0.fc")
        assert fc is not None and fc.self_device_us is not None and fc.self_device_us.median > 0
        if extra:
            assert fc.backward_self_cpu_us is not None and fc.backward_self_cpu_us.median > 0


def test_runner_moves_a_cpu_model_and_puts_it_back() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    weight = model[0].weight
    session = profile(model, torch.rand(2, 8), device="cuda", warmup=1, iters=2)
    assert session.use_device
    assert model[0].weight is weight and weight.device.type == "cpu"
