"""The issue's training loop on CUDA in a with-block, fp16 autocast and GradScaler: device time
forward and backward per layer, the optimizer's row (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import hybridprof
from tests.training_loops import linears, mlp

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def run(profiled: bool) -> tuple[dict[str, torch.Tensor], hybridprof.Profile, list[str]]:
    model = mlp().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    torch.manual_seed(1)
    x = torch.randn(64, 32, device="cuda")
    y = torch.randint(0, 5, (64,), device="cuda")
    schedule = hybridprof.schedule(wait=1, warmup=1, active=6)
    prof = hybridprof.Profile(model, use_cuda=True, leaves_only=False, schedule=schedule)

    def step() -> None:
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y) / 2
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    if profiled:
        with prof:
            for _ in range(8):
                step()
                prof.step()
    else:
        for _ in range(8):
            step()
    torch.cuda.synchronize()
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return weights, prof, linears(model)


def test_device_time_forward_and_backward_and_the_optimizer() -> None:
    bare, _, _ = run(False)
    weights, prof, paths = run(True)
    assert all(torch.equal(bare[k], weights[k]) for k in bare)
    session = prof.session()
    assert session.use_device and session.backward and session.iterations == 6
    for path in paths:
        record = session.record(path)
        assert record is not None and record.total_device_us is not None
        assert record.total_device_us.median > 0, path
        assert record.backward_self_device_us is not None
        assert record.backward_self_device_us.median > 0, path
    optimizer = session.optimizer
    assert optimizer is not None and optimizer.self_device_us is not None
    assert optimizer.self_device_us.median > 0
    assert {"step", "clip_grad", "grad_scaler", "zero_grad"} <= {p.name for p in optimizer.parts}
    # each step's rows add up to its step range (the device thread's backward taken out of it)
    assert session.outside_cpu_us is not None
    for i, whole in enumerate(session.iteration_cpu_us):
        own = sum(
            s.self_cpu_us.values[i] + s.backward_self_cpu_us.values[i]
            for s in (r.per_iteration for r in session.records)
            if s is not None and s.backward_self_cpu_us is not None
        )
        assert optimizer.per_iteration is not None
        assert own + optimizer.per_iteration.values[i] <= whole * 1.05
