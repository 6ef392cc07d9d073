"""FLOPs that cannot be impossible: grouped convolutions' backward, attention on CPU, TorchScript
modules, on MobileNet-, EfficientNet- and ConvNeXt-style blocks written here (torchvision does not
import on this project's machines)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hybridprof.api import profile
from hybridprof.datamodel import ProfileSession, WorkProfile

PEAK = {"peak_gflops": 50.0, "peak_gbps": 10.0}
# torch 2.13 deprecates TorchScript; users still hand us scripted modules, so we test them.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),  # torch 2.13
    pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning"),  # torch 2.14
]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: expand 1x1, depthwise 3x3, project 1x1."""

    def __init__(self, channels: int = 16, expand: int = 4) -> None:
        super().__init__()
        hidden = channels * expand
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.bn2 = nn.BatchNorm2d(hidden)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu6(self.bn1(self.expand(x)))
        h = F.relu6(self.bn2(self.depthwise(h)))
        return x + self.bn3(self.project(h))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.act = nn.SiLU()
        self.restore = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.restore(self.act(self.reduce(self.pool(x)))))


class MBConv(nn.Module):
    """EfficientNet's block: expand, strided 5x5 depthwise, squeeze-and-excite, project."""

    def __init__(self, channels: int = 16, out: int = 24) -> None:
        super().__init__()
        hidden = channels * 6
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.depthwise = nn.Conv2d(hidden, hidden, 5, stride=2, padding=2, groups=hidden)
        self.se = SqueezeExcite(hidden, channels // 4)
        self.project = nn.Conv2d(hidden, out, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.depthwise(F.silu(self.expand(x))))
        return self.project(self.se(h))


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block: 7x7 depthwise, LayerNorm over channels, pointwise MLP as Linears."""

    def __init__(self, dim: int = 24) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = self.pwconv2(self.act(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


class ConvNets(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)  # the input needs no gradient: weight only
        self.mobilenet = InvertedResidual()
        self.efficientnet = MBConv()
        self.convnext = ConvNeXtBlock()
        self.up = nn.ConvTranspose2d(24, 8, 2, stride=2, groups=8)  # grouped, transposed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.convnext(self.efficientnet(self.mobilenet(self.stem(x)))))


def conv_flops(conv: nn.Conv2d | nn.ConvTranspose2d, n: int, size_in: int) -> int:
    """2 x the multiply-adds of a convolution's forward, from its own definition."""
    k = conv.kernel_size[0] * conv.kernel_size[1]
    if isinstance(conv, nn.ConvTranspose2d):  # every input pixel meets the kernel
        positions = size_in * size_in
        return 2 * n * positions * k * conv.in_channels * (conv.out_channels // conv.groups)
    size_out = (size_in + 2 * conv.padding[0] - conv.kernel_size[0]) // conv.stride[0] + 1
    macs = n * size_out * size_out * k * conv.out_channels * (conv.in_channels // conv.groups)
    return 2 * macs


def _work(model: nn.Module, x: torch.Tensor, **options: object) -> WorkProfile:
    torch.manual_seed(0)
    session = profile(model, x, warmup=0, iters=2, flops=True, backward=True, **options)
    assert session.flops is not None
    return session.flops


def test_grouped_convolutions_backward_is_twice_the_forward_per_gradient() -> None:
    model, n = ConvNets(), 2
    work = _work(model, torch.randn(n, 3, 16, 16), **PEAK)
    sizes = {
        "stem": 16,
        "mobilenet.expand": 16,
        "mobilenet.depthwise": 16,
        "mobilenet.project": 16,
        "efficientnet.expand": 16,
        "efficientnet.depthwise": 16,
        "efficientnet.se.reduce": 1,
        "efficientnet.se.restore": 1,
        "efficientnet.project": 8,
        "convnext.dwconv": 8,
        "up": 8,
    }
    for path, size in sizes.items():
        conv = model.get_submodule(path)
        assert isinstance(conv, nn.Conv2d | nn.ConvTranspose2d)
        forward = conv_flops(conv, n, size)
        layer = work.layer(path)
        assert layer is not None
        assert layer.flops == pytest.approx(forward, rel=0.01), path
        gradients = 1 if path == "stem" else 2  # the stem's input needs no gradient
        assert layer.backward_flops == pytest.approx(gradients * forward, rel=0.01), path


def test_no_verdict_above_a_roof_on_mobile_blocks() -> None:
    # the peak measured on this machine, as a user's run does
    model = ConvNets()
    torch.manual_seed(0)
    session = profile(
        model, torch.randn(4, 3, 32, 32), warmup=1, iters=6, flops=True, backward=True, threads=1
    )
    from hybridprof.analysis.roofline import session_rooflines

    verdicts = [x.verdict for x in session_rooflines(session) if x.verdict]
    assert verdicts
    shown = [int(p) for v in verdicts for p in re.findall(r"at (\d+)% of peak", v)]
    assert all(p <= 100 for p in shown), verdicts


class Attention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_attention_on_cpu_counts_the_cuda_kernels_formula() -> None:
    b, t, d, heads = 2, 10, 32, 4
    work = _work(Attention(d, heads), torch.randn(b, t, d), **PEAK)
    root = work.layer("")
    assert root is not None
    # q @ k^T and scores @ v: 2 x (2 * b * heads * t * t * d/heads)
    assert root.flops == 2 * 2 * b * heads * t * t * (d // heads)
    # the scores again, then the gradients of v, the scores, q and k: five matmuls
    assert root.backward_flops * 2 == 5 * root.flops
    names = {o.name for o in root.not_counted}
    assert not {n for n in names if "scaled_dot_product" in n}


class ScriptedInside(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.jit.script(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16)))
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def test_a_scripted_module_owns_its_flops() -> None:
    model, rows = ScriptedInside(), 8
    before = dict(vars(model.body))
    work = _work(model, torch.randn(rows, 16), **PEAK)
    body, root = work.layer("body"), work.layer("")
    assert body is not None and root is not None
    assert body.flops == 2 * rows * (16 * 32 + 32 * 16)
    assert body.backward_flops == 2 * body.flops - 2 * rows * 16 * 32  # no gradient of x
    assert root.flops == 0  # nothing is charged to the parent
    assert dict(vars(model.body)) == before  # its forward is its own again


def test_a_fully_scripted_model_has_rows_that_add_up() -> None:
    model = torch.jit.script(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8)))
    before = dict(vars(model))
    torch.manual_seed(0)
    session: ProfileSession = profile(
        model, torch.randn(4, 16), warmup=0, iters=1, flops=True, **PEAK
    )
    work = session.flops
    assert work is not None and work.forward_flops > 0
    assert sum(w.flops for w in work.layers) == work.forward_flops
    assert dict(vars(model)) == before  # the wrapped forward is gone again
