"""Profile(use_cuda=True) on a real GPU: device columns and device time per layer (skipped without
CUDA)."""

from __future__ import annotations

import pytest
import torch

import hybridprof

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_device_time_and_columns(strategy: str) -> None:
    model = hybridprof.examples.alexnet(num_classes=10).eval().cuda()
    x = torch.rand(1, 3, 64, 64, device="cuda")
    model(x)
    torch.cuda.synchronize()
    with hybridprof.Profile(model, use_cuda=True, profile_memory=True, strategy=strategy) as prof:
        model(x)
    session = prof.session()
    conv = session.record("features.0")
    assert conv is not None and conv.total_device_us is not None
    assert conv.total_device_us.median > 0
    assert session.use_device and session.environment.device.startswith("cuda:")
    header = prof.display().splitlines()[0]
    assert "Self CUDA total" in header and "CUDA Mem" in header


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_raw_event_lists_carry_device_time(strategy: str) -> None:
    """torchprof code reads device time from raw()'s events (kernels under their launching op)."""
    import hybridprof.torchprof as torchprof

    model = hybridprof.examples.alexnet(num_classes=10).eval().cuda()
    x = torch.rand(1, 3, 64, 64, device="cuda")
    model(x)
    torch.cuda.synchronize()
    with hybridprof.Profile(model, use_cuda=True, profile_memory=True, strategy=strategy) as prof:
        model(x)
    traces, events = prof.raw()
    call = events[("AlexNet", "features", "0")][0]
    assert sum(e.self_device_time_total for e in call) > 0
    assert call.total_average().device_time_total > 0
    text = torchprof.display.traces_to_display(traces, events, use_cuda=True, profile_memory=True)
    assert "CUDA total" in text.splitlines()[0]
