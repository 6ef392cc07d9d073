"""`backward=True`: a training step per iteration, backward time per layer, the model put back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.datamodel import Stat
from hybridprof.errors import ModelRunError, UsageError
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.basics.workload import scalar_loss


def mlp(width: int = 256) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(128, width),
        nn.ReLU(),
        nn.LayerNorm(width),
        nn.Linear(width, width),
        nn.Tanh(),
        nn.Linear(width, 10),
    )


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Timing comparisons on one thread: on this shared 2-core machine a second intra-op thread
    makes some iterations 50x slower (measured), which blurs medians taken field by field."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def median(stat: Stat | None) -> float:
    assert stat is not None
    return stat.median


def test_every_leaf_has_a_backward_time() -> None:
    model = mlp()
    session = profile(
        model, torch.rand(64, 128), warmup=2, iters=5, backward=True, leaves_only=True
    )
    assert session.backward
    assert {r.path for r in session.records} == {str(i) for i in range(6)}
    for record in session.records:
        assert median(record.backward_self_cpu_us) > 0, record.path
        assert any(op.backward for op in record.ops), record.path
    linear = session.record("3")
    assert linear is not None
    assert any(op.backward and "Addmm" in op.name for op in linear.ops)


def test_forward_plus_backward_self_times_cover_the_step(one_thread: None) -> None:
    """In one training step, the layers' forward + backward self time is the step's profiled CPU
    time.

    What no layer owns is the loss (`aten::mean` and its `MeanBackward0`, ~70 us whatever the
    model): 3.6% of a step of the 256-wide MLP, and over 10% on this shared machine under load.
    At width 512 the step is ~7 ms and the loss 1.5-1.9% of it (0.4-1.1% with two busy processes
    beside it, measured), so the 10% bound keeps a 5x margin while still catching a lost layer or
    backward node; and since self times are disjoint parts of the step's top-level events, they
    can never add up to more than the step (a double count fails). Each session has one measured
    iteration, so every median is that same step; the median over five sessions keeps a
    preemption inside the loss in one or two of them from failing the test.
    """
    model, x = mlp(width=512), torch.rand(256, 128)
    gaps = []
    for _ in range(5):
        session = profile(model, x, warmup=3, iters=1, backward=True)
        layers = sum(r.self_cpu_us.median + median(r.backward_self_cpu_us) for r in session.records)
        (whole,) = session.iteration_cpu_us
        assert layers <= whole * (1 + 1e-9), (layers, whole)
        gaps.append((whole - layers) / whole)
    assert sorted(gaps)[2] < 0.10, gaps


def test_training_state_is_restored() -> None:
    model = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 2))
    model.eval()
    model[0].weight.requires_grad_(False)  # a frozen layer: backward turns it on, then off again
    existing = torch.ones_like(model[3].weight)  # type: ignore[arg-type]
    model[3].weight.grad = existing
    buffers = [b.clone() for b in model.buffers()]
    profile(model, torch.rand(4, 6), warmup=1, iters=2, backward=True)
    assert not live_patches()
    assert all(not m.training for m in model.modules())
    assert model[0].weight.requires_grad is False and model[0].bias.requires_grad is True
    assert model[3].weight.grad is existing and model[0].bias.grad is None
    assert all(torch.equal(a, b) for a, b in zip(buffers, model.buffers(), strict=True))


def test_loss_from_nested_output_structure() -> None:
    leaf = torch.rand(3, requires_grad=True)
    output = {"ids": torch.arange(3), "pair": (torch.zeros(2), leaf * 2)}
    loss = scalar_loss(output)
    assert loss.dim() == 0 and loss.requires_grad
    with pytest.raises(ModelRunError, match="no floating-point tensor"):
        scalar_loss({"ids": torch.arange(3)})
    with pytest.raises(ModelRunError, match="does not depend on any trainable tensor"):
        scalar_loss(torch.zeros(2))


def test_dict_output_model_trains() -> None:
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            h = self.body(x)
            return {"index": x.argmax(dim=1), "logits": self.head(h)}

    session = profile(Heads(), torch.rand(4, 8), warmup=1, iters=2, backward=True)
    assert all(median(r.backward_self_cpu_us) > 0 for r in session.records if r.is_leaf)


def test_backward_needs_the_session_strategy() -> None:
    with pytest.raises(UsageError, match="--backward needs a strategy"):
        profile(mlp(), torch.rand(2, 128), backward=True, strategy="timer")
