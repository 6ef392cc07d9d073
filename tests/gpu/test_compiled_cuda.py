"""Compiled models on a real GPU (skipped without CUDA): inductor's Triton kernels and the extern
calls it makes are attributed to layers, with device time per layer; dynamo compiles nothing more
for hybridprof. Unverified on the machines that wrote it (no GPU there): run by
scripts/gpu_check.sh where one is lent."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import hybridprof
from tests.compiled_models import counters, delta, fresh

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


@pytest.fixture(scope="module", params=["torch.compile", "model.compile"])
def profiled(request: pytest.FixtureRequest) -> dict[str, Any]:
    torch.manual_seed(0)
    eager = fresh().Transformer().eval().cuda()
    x = torch.randint(0, 100, (2, 16), device="cuda")
    if request.param == "model.compile":
        eager.compile()
        model: torch.nn.Module = eager
    else:
        model = torch.compile(eager)
    before = counters()
    session = hybridprof.profile(model, x, warmup=1, iters=3, device="cuda")
    after = counters()
    model(x)
    torch.cuda.synchronize()
    return {"session": session, "during": delta(before, after), "next": delta(after, counters())}


def test_triton_kernels_are_split_by_layer_with_device_time(profiled: dict[str, Any]) -> None:
    session = profiled["session"]
    assert session.use_device and session.compiled is not None
    assert session.compiled.kernel_map == "mapped"
    assert session.compiled.unmatched_events == 0
    records = {r.path: r for r in session.records}
    for path in ("blocks.0.attn", "blocks.1.attn", "blocks.0.mlp", "blocks.1.mlp", "head"):
        assert records[path].total_device_us is not None, path
        assert records[path].total_device_us.median > 0, path
    kernels = [op.name for r in session.records for op in r.ops]
    assert any(name.startswith("triton_") for name in kernels)


def test_dynamo_compiles_nothing_more(profiled: dict[str, Any]) -> None:
    assert profiled["during"] == (1, 1, 0, 0)
    assert profiled["next"] == (0, 0, 0, 0)


def test_rows_add_up(profiled: dict[str, Any]) -> None:
    session = profiled["session"]
    for i in range(session.iterations):
        rows = sum(r.per_iteration.self_cpu_us.values[i] for r in session.records)
        assert rows <= session.iteration_cpu_us[i] + 0.1 * len(session.records)
