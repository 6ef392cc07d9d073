"""On a GPU the model and the CUDA random stream are left as they were (skipped without CUDA)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import hybridprof

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("strategy", ["session", "per-call", "timer"])
def test_profile_on_cuda_keeps_buffers_and_the_cuda_random_stream(
    strategy: str, backward: bool
) -> None:
    if backward and strategy != "session":
        pytest.skip("backward needs the session strategy")
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5)).cuda().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.rand(4, 8, device="cuda")
    torch.cuda.manual_seed(3)
    state = torch.cuda.get_rng_state()
    hybridprof.profile(
        model, x, strategy=strategy, backward=backward, warmup=1, iters=2, device="cuda"
    )
    assert torch.equal(torch.cuda.get_rng_state(), state)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert all(p.grad is None for p in model.parameters())


def test_a_copy_made_on_cuda_while_profiling_computes_with_its_own_weights() -> None:
    model = nn.Sequential(nn.Linear(4, 4)).cuda()
    x = torch.rand(2, 4, device="cuda")
    with hybridprof.Profile(model, use_cuda=True):
        twin = copy.deepcopy(model)
        with torch.no_grad():
            twin[0].weight.zero_()
            twin[0].bias.fill_(1.0)
        out = twin(x)
        model(x)
    assert torch.equal(out, torch.ones(2, 4, device="cuda"))
    assert "forward" not in vars(twin[0])
