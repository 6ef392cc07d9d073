"""Memory per layer on CUDA, against torch.cuda's own memory statistics: the 64 MiB layer, the
Linear's saved input, the transformer step's peak, reserved against allocated, and the replayed
curve against the caching allocator's count. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import DeviceMemory, ProfileSession

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MiB = 2**20


def cuda_memory(session: ProfileSession) -> DeviceMemory:
    assert session.memory is not None
    device = session.memory.devices[0]
    assert device.device.startswith("cuda") and device.start_exact
    return device


class Spike(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tmp = torch.ones(16 * MiB, device=x.device)  # 64 MiB
        total = tmp.sum()
        del tmp
        return x + total * 0


class ViewOnly(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], -1)


def test_the_64_mib_layer_is_the_peak_as_torch_cuda_counts_it() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), Spike(), ViewOnly(), nn.ReLU(), nn.Linear(32, 4))
    x = torch.randn(16, 32)
    session = hybridprof.profile(
        model, x, device="cuda", warmup=1, iters=2, backward=True, profile_memory=True
    )
    device = cuda_memory(session)
    spike, view = device.layer("1"), device.layer("2")
    assert spike is not None and spike.peak >= 64 * MiB
    assert view is not None and view.peak == 0
    assert (device.peak.phase, device.peak.path) == ("forward", "1")
    # the same step unprofiled, with torch's own peak statistic
    model.cuda().train()
    xc = x.cuda()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    model(xc).float().mean().backward()
    torch.cuda.synchronize()
    expected = torch.cuda.max_memory_allocated() - start
    assert device.peak.above_start_bytes == pytest.approx(expected, rel=0.02)
    assert device.peak.reserved_bytes is not None
    assert device.peak.reserved_bytes >= device.peak.live_bytes
    assert not any("differs from the caching allocator" in n for n in device.notes)


def test_a_linear_on_cuda_saves_its_input() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    session = hybridprof.profile(
        model, torch.randn(64, 256), device="cuda", warmup=1, iters=2, backward=True,
        profile_memory=True,
    )  # fmt: skip
    device = cuda_memory(session)
    first, last = device.layer("0"), device.layer("2")
    assert first is not None and first.saved == pytest.approx(64 * 256 * 4, rel=0.01)
    assert last is not None and last.saved == pytest.approx(64 * 512 * 4, rel=0.01)
    assert first.backward_self_alloc > 0  # backward ran on the autograd worker thread


def test_a_transformer_step_with_adamw_on_cuda_matches_max_memory_allocated() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    model = nn.Sequential(layer, nn.Linear(256, 256)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16, 128, 256, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    expected = torch.cuda.max_memory_allocated() - start
    with hybridprof.Profile(model, use_cuda=True, profile_memory=True, optimizers=[opt]) as prof:
        step()
    device = cuda_memory(prof.session())
    peak = device.peak
    assert peak.phase in ("backward", "optimizer")
    assert peak.above_start_bytes == pytest.approx(expected, rel=0.02)
    assert peak.categories is not None
    assert abs(peak.categories.total() - peak.live_bytes) <= 0.02 * peak.live_bytes
    assert device.start_bytes == pytest.approx(start, rel=0.02)
