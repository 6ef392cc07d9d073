"""CUDA: the registry's `device_time` flag says which strategies give layers kernel time, and
`Profile(use_cuda=True)` goes through the one device check. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.api import profile
from hybridprof.runtime.strategies import SPECS, StrategySpec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 64))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_device_time_flag_says_which_strategies_time_kernels(spec: StrategySpec) -> None:
    session = profile(
        small_net(), torch.randn(64, 256), device="cuda", warmup=2, iters=3, strategy=spec.name
    )
    timed = [r.path for r in session.records if r.self_device_us and r.self_device_us.median > 0]
    if spec.device_time:
        assert set(timed) >= {"0", "2"}, timed  # both Linear layers launch kernels
    else:
        assert timed == []


def test_profile_use_cuda_runs_on_the_device() -> None:
    model = small_net().cuda()
    with hybridprof.Profile(model, use_cuda=True) as prof:
        model(torch.randn(64, 256, device="cuda"))
    session = prof.session()
    assert session.use_device
    record = session.record("0")
    assert record is not None and record.self_device_us is not None
    assert record.self_device_us.median > 0
