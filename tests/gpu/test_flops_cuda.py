"""`run --flops` on CUDA: counts, totals, the peak measured on the GPU, device-time verdicts.

Skipped without CUDA; GPT-2's attention needs transformers (skipped without it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hybridprof.api import profile

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(self.conv(x)).mean(dim=(2, 3)))


def _counter_total(model: nn.Module, x: torch.Tensor) -> int:
    with FlopCounterMode(display=False) as counter:
        model(x).float().mean().backward()
    for parameter in model.parameters():
        parameter.grad = None
    return counter.get_total_flops()


def test_flops_on_cuda_forward_and_backward() -> None:
    model, x = ConvNet(), torch.randn(8, 3, 64, 64)
    session = profile(model, x, device="cuda", warmup=2, iters=3, backward=True, flops=True)
    work = session.flops
    assert work is not None and session.use_device
    assert "NVIDIA" in work.peak.how or "cuda" in work.peak.how
    assert work.peak.source.startswith("measured") and work.peak.gflops > 100  # a GPU, not CPU
    conv = work.layer("conv")
    assert conv is not None and conv.flops == 2 * 3 * 3 * 3 * 32 * 64 * 64 * 8
    expected = _counter_total(model.cuda(), x.cuda())
    layers = sum(w.flops + w.backward_flops for w in work.layers)
    assert abs(layers - expected) <= 0.001 * expected
    from hybridprof.analysis.roofline import by_path

    lines = by_path(session)
    assert lines["conv"].verdict and lines["fc"].verdict  # judged on self device time


def test_gpt2_attention_counts_for_its_attention_module() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=500)
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 500, (2, 64))
    session = profile(model, ids, device="cuda", warmup=1, iters=2, flops=True)
    work = session.flops
    assert work is not None
    with FlopCounterMode(display=False) as counter:  # autograd on, as the counting pass runs
        model.cuda()(ids.cuda())
    counts = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    attn = work.layer("h.0.attn")
    children = counts.get("GPT2Model.h.0.attn.c_attn", 0) + counts.get(
        "GPT2Model.h.0.attn.c_proj", 0
    )
    assert attn is not None and attn.flops == counts["GPT2Model.h.0.attn"] - children > 0
    layers = sum(w.flops for w in work.layers)
    assert abs(layers - counter.get_total_flops()) <= 0.001 * counter.get_total_flops()
