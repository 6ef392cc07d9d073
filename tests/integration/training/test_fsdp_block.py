"""A `Profile` with-block around an FSDP2-sharded training loop, in this process (gloo, world size
1): each unit's row carries its communication, and the model and its training are as they were.

With one rank FSDP2 gathers nothing (no all-gather range opens), so the gathers' figures need two
ranks (tests/integration/torchrun/test_fsdp_ranks.py); the reduce-scatter of each unit's gradients
runs here and is what the rows show.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import hybridprof
from hybridprof.analysis.layer_table import layer_table
from hybridprof.reporting import renderer_for
from hybridprof.runtime.distributed.fsdp_units import fsdp_unit_bytes

WIDTH = 16


class Block(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(WIDTH, hidden)
        self.down = nn.Linear(hidden, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(h) for h in (32, 256, 32))
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x).sum(-1)


@pytest.fixture
def one_rank() -> Iterator[None]:
    with tempfile.NamedTemporaryFile() as store_file:
        store = dist.FileStore(store_file.name, 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def sharded(policy: MixedPrecisionPolicy | None = None) -> Net:
    torch.manual_seed(0)
    model = Net()
    for block in model.blocks:
        fully_shard(block, mp_policy=policy or MixedPrecisionPolicy())
    fully_shard(model, mp_policy=policy or MixedPrecisionPolicy())
    return model


def train(model: Net, prof: hybridprof.Profile | None, steps: int = 3) -> list[torch.Tensor]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        model(torch.randn(8, WIDTH, generator=data)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if prof is not None:
            prof.step()
    return [p.to_local().detach().clone() for p in model.parameters()]


def own_numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_each_unit_row_has_its_reduce_scatter_with_exact_bytes(one_rank: None) -> None:
    model = sharded()
    with hybridprof.Profile(model) as prof:
        train(model, prof)
    table = layer_table(prof.session())
    assert table.has_fsdp
    rows = {row.path: row for row in table.rows}
    for index, block in enumerate(model.blocks):
        comm = rows[f"blocks.{index}"].comm_of("reduce_scatter")
        assert comm is not None and comm.calls == 1
        assert comm.nbytes == own_numel(block) * 4  # float32, one rank: no padding
        assert comm.time_us.median > 0
        assert rows[f"blocks.{index}"].comm_of("all_gather") is None  # one rank gathers nothing
    root = rows[""].comm_of("reduce_scatter")  # the root unit holds `head`
    assert root is not None and root.nbytes == own_numel(model.head) * 4
    assert rows["blocks.1"].comm_of("reduce_scatter").nbytes == max(  # type: ignore[union-attr]
        c.nbytes for c in prof.session().fsdp
    )
    units = {"", "blocks.0", "blocks.1", "blocks.2"}
    assert {row.path for row in table.layers()} >= units  # a leaves-only selection takes them
    for unit in units:  # the plan says why
        target = prof.plan.target(unit)
        assert target is not None and target.selected and "FSDP2 unit" in target.reason
    narrowed = hybridprof.Profile(model, globs=["blocks.*.*"]).plan  # takes what it names only
    assert not units & set(narrowed.selected_paths())
    assert all(row.comm == () for row in table.layers() if row.path not in units)


def test_fsdp2s_hooks_are_the_units_time_and_the_rows_add_up_to_each_step(
    one_rank: None,
) -> None:
    """FSDP2 runs each unit's hooks (its reduce-scatter, its pre- and post-forward) outside the
    unit's forward: without them moved to the unit's row, they were in the outside row (the
    root's) and in the parent's backward node. Each step's rows still add up to the step."""
    model = sharded()
    with hybridprof.Profile(model) as prof:
        train(model, prof)
    session = prof.session()
    outside = [op.name for op in session.outside_ops if op.name.startswith(("FSDP", "c10d"))]
    assert not outside, outside
    records = {r.path: r for r in session.records}
    for comm in session.fsdp:
        unit = records[comm.path]
        assert unit.backward_self_cpu_us is not None
        if comm.kind == "reduce_scatter":
            assert unit.backward_self_cpu_us.median >= comm.time_us.median
    assert session.optimizer is not None and session.optimizer.per_iteration is not None
    assert session.outside_cpu_us is not None
    optimizer = session.optimizer.per_iteration.values
    left = []
    for i, step in enumerate(session.iteration_cpu_us):
        own = sum(
            s.self_cpu_us.values[i] + s.backward_self_cpu_us.values[i]
            for s in (r.per_iteration for r in session.records)
            if s is not None and s.backward_self_cpu_us is not None
        )
        assert own + optimizer[i] <= step * (1 + 1e-6)  # nothing counted twice
        left.append(step - own - optimizer[i])  # the outside row's time in that step
    assert statistics.median(left) == pytest.approx(session.outside_cpu_us.median, abs=1.0)


def test_the_columns_are_in_every_view(one_rank: None) -> None:
    model = sharded()
    with hybridprof.Profile(model) as prof:
        train(model, prof)
    frame = prof.to_dataframe()
    by_path = frame.set_index("path")
    assert by_path.loc["blocks.1", "reduce_scatter_bytes"] == own_numel(model.blocks[1]) * 4
    assert by_path.loc["blocks.1", "reduce_scatter_us"] > 0
    assert "Reduce-scatter" in prof.display() and "Scattered" in prof.display()
    page = renderer_for("report.html").render(prof.session())
    assert isinstance(page, str) and "Reduce-scatter" in page and "Scattered" in page


def test_the_model_and_its_training_are_as_without_hybridprof(one_rank: None) -> None:
    plain = train(sharded(), None)
    model = sharded()
    classes = [type(m) for m in model.modules()]
    params = [id(p) for p in model.parameters()]
    with hybridprof.Profile(model) as prof:
        profiled = train(model, prof)
    assert [type(m) for m in model.modules()] == classes  # FSDP2's classes kept
    assert [id(p) for p in model.parameters()] == params
    assert all("forward" not in vars(m) for m in model.modules())
    assert all(torch.equal(a, b) for a, b in zip(plain, profiled, strict=True))


def test_bytes_follow_the_mixed_precision_dtypes(one_rank: None) -> None:
    half = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = sharded(half)
    train(model, None, steps=1)  # FSDP2 sets its dtypes on the first forward
    sizes = {path: (gather, scatter) for path, gather, scatter in fsdp_unit_bytes(model)}
    numel = own_numel(model.blocks[1])
    assert sizes["blocks.1"] == (numel * 2, numel * 4)
    assert set(sizes) == {"", "blocks.0", "blocks.1", "blocks.2"}
    assert fsdp_unit_bytes(Net()) == ()  # nothing sharded
