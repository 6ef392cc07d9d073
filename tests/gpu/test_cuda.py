"""CUDA: kernels are linked to their launching op's layer; the timer synchronises. Skipped without
CUDA."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.api import profile

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def small_convnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 30 * 30, 10))


def test_session_gives_device_time_to_each_layer() -> None:
    session = profile(small_convnet(), torch.randn(2, 3, 32, 32), device="cuda", warmup=2, iters=3)
    for path in ("0", "1", "3"):
        record = session.record(path)
        assert record is not None and record.self_device_us is not None, path
        assert record.self_device_us.median > 0, path
        assert any(op.self_device_us > 0 for op in record.ops), path


def test_session_device_memory_with_profile_memory() -> None:
    session = profile(
        small_convnet(),
        torch.randn(2, 3, 32, 32),
        device="cuda",
        warmup=1,
        iters=2,
        profile_memory=True,
    )
    record = session.record("0")
    assert record is not None and record.device_mem > 0


def test_backward_kernels_reach_the_layers() -> None:
    session = profile(
        small_convnet(), torch.randn(2, 3, 32, 32), device="cuda", warmup=1, iters=2, backward=True
    )
    record = session.record("3")
    assert record is not None and record.backward_self_cpu_us is not None
    assert record.backward_self_cpu_us.median > 0


def test_timer_covers_the_kernels_it_waits_for() -> None:
    session = profile(
        small_convnet(),
        torch.randn(64, 3, 32, 32),
        device="cuda",
        warmup=2,
        iters=3,
        strategy="timer",
    )
    # complete attribution: the root (the Sequential) is measured too, its self time the glue
    assert {r.path for r in session.records} == {"", "0", "1", "2", "3"}
    assert all(r.self_cpu_us.median > 0 for r in session.records if r.path)
