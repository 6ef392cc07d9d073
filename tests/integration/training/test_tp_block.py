"""A `Profile` with-block around a tensor-parallel (DTensor) training loop, in this process (gloo,
world size 1): the layers are found with their group, each call is one call with its hooks'
work its own, and the model keeps exactly its hooks, a failing forward included. The figures of
two ranks are tests/integration/torchrun/test_tp_ranks.py's."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import hybridprof
from hybridprof.analysis.layer_table import layer_table
from hybridprof.runtime.distributed.tp_layers import tp_layers


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 64)
        self.down = nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


@pytest.fixture
def one_rank() -> Iterator[None]:
    with tempfile.NamedTemporaryFile() as store_file:
        store = dist.FileStore(store_file.name, 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def parallel() -> MLP:
    torch.manual_seed(0)
    model = MLP()
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    return model


def hooks(model: nn.Module) -> list[tuple[object, ...]]:
    return [(*m._forward_pre_hooks, *m._forward_hooks) for m in model.modules()]


def train(model: MLP, prof: hybridprof.Profile, steps: int = 3) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        model(torch.rand(4, 16)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        prof.step()


def test_the_layers_are_found_with_their_mesh_and_group(one_rank: None) -> None:
    model = parallel()
    found = tp_layers(model, ["", "up", "down"])
    assert found == {"up": "mesh dim tp, group default_pg", "down": "mesh dim tp, group default_pg"}
    assert tp_layers(MLP(), ["", "up", "down"]) == {}  # nothing parallel


def test_each_call_is_one_call_and_the_hooks_are_left_as_they_were(one_rank: None) -> None:
    model = parallel()
    before = hooks(model)
    with hybridprof.Profile(model) as prof:
        train(model, prof)
    assert hooks(model) == before
    rows = {row.path: row for row in layer_table(prof.session()).rows}
    for path in ("up", "down"):
        assert rows[path].calls_per_iteration == 1, path
    assert "Redistribute" in {op.name for op in rows["down"].record.ops}  # its forward hook's


def test_a_failing_forward_leaves_the_hooks_as_they_were(one_rank: None) -> None:
    model = parallel()
    before = hooks(model)
    with pytest.raises(RuntimeError), hybridprof.Profile(model) as prof:
        train(model, prof, steps=1)
        model(torch.rand(4, 7))  # `up` fails inside its hooks' range
    assert hooks(model) == before
    with hybridprof.Profile(model) as prof:  # and the next block profiles as before
        train(model, prof, steps=2)
    assert layer_table(prof.session()).rows
