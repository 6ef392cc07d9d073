"""The user's own training step inside `with hybridprof.Profile(...)`: forward per layer, backward
to the layer whose forward made it, the optimizer to `(optimizer)`, the rest outside; the rows add
up to the step, and training gives bit for bit what it gives unprofiled."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession
from tests.training_loops import Loop, Trained, bitwise_equal, linears, train


def every_module(model: nn.Module) -> hybridprof.Profile:
    return hybridprof.Profile(model, leaves_only=False)


def profiled(name: str, loop: Loop) -> tuple[Trained, Trained, ProfileSession]:
    bare = train(name, loop)
    run = train(name, loop, profile=every_module)
    assert run.prof is not None
    return bare, run, run.prof.session()


def step_sum_us(session: ProfileSession, iteration: int = 0) -> float:
    """Forward + backward self time of every layer, the optimizer and the outside time."""
    layers = 0.0
    for record in session.records:
        series = record.per_iteration
        if series is None:
            backward = record.backward_self_cpu_us
            layers += record.self_cpu_us.median + (backward.median if backward else 0.0)
        else:
            backward_series = series.backward_self_cpu_us
            layers += series.self_cpu_us.values[iteration]
            layers += backward_series.values[iteration] if backward_series else 0.0
    optimizer = session.optimizer
    assert optimizer is not None and session.outside_cpu_us is not None
    if optimizer.per_iteration is None:
        return layers + optimizer.self_cpu_us.median + session.outside_cpu_us.median
    return layers + optimizer.per_iteration.values[iteration]


def assert_attributed(run: Trained, session: ProfileSession) -> None:
    missing = [
        path
        for path in linears(run.task.model)
        if (r := session.record(path)) is None
        or r.backward_self_cpu_us is None
        or r.backward_self_cpu_us.min <= 0
    ]
    assert missing == [], "Linear layers without backward time"
    assert session.backward
    assert session.optimizer is not None and session.optimizer.self_cpu_us.min > 0
    step_us = session.iteration_cpu_us[0]
    assert step_sum_us(session) == pytest.approx(step_us, rel=1e-6)
    # the step range holds the step the user's loop timed (perf_counter), within 5%
    assert run.walls_us[0] <= step_us * 1.0001
    assert step_us <= run.walls_us[0] * 1.05 + 100  # us: entering and leaving the step range


MODELS = ["mlp", "transformer"]


@pytest.mark.parametrize("name", MODELS)
def test_the_issues_loop_is_attributed_and_trains_bitwise_equal(name: str) -> None:
    bare, run, session = profiled(name, Loop())
    assert bitwise_equal(bare, run)
    assert_attributed(run, session)
    printed = str(run.prof)
    assert "Self CPU (backward)" in printed and "CPU total (backward)" in printed
    assert "(optimizer)" in printed and "(outside modules)" in printed
    assert "clip_grad" in printed and "zero_grad" in printed


def test_a_hugging_face_model_from_a_config() -> None:
    pytest.importorskip("transformers")
    bare, run, session = profiled("gpt2", Loop())
    assert bitwise_equal(bare, run)
    assert_attributed(run, session)


@pytest.mark.parametrize(
    "loop",
    [
        Loop(optimizer="sgd"),
        Loop(optimizer="fused"),
        Loop(micro=1, clip=False, scheduler=False),
        Loop(micro=3, set_to_none=False),
        Loop(autocast=torch.bfloat16),
        Loop(groups=True),
    ],
    ids=["sgd", "fused-adamw", "one-micro-batch", "three-micro-batches-zeroed", "bf16", "groups"],
)
def test_optimizers_and_loops(loop: Loop) -> None:
    bare, run, session = profiled("transformer", loop)
    assert bitwise_equal(bare, run)
    assert_attributed(run, session)
    optimizer = session.optimizer
    assert optimizer is not None
    parts = {p.name: p for p in optimizer.parts}
    assert {"step", "zero_grad"} <= parts.keys()
    assert ("clip_grad" in parts) == loop.clip
    assert parts["step"].calls == 1 and optimizer.calls == 1
    assert optimizer.classes == ("SGD" if loop.optimizer == "sgd" else "AdamW",)
    groups = [p for p in optimizer.parts if p.within == "step"]
    assert len(groups) == (2 if loop.groups else 0)
    if groups:  # each group's span of the step, less than the whole step
        assert all(0 < g.cpu_us.median < parts["step"].cpu_us.median for g in groups)


def test_gradient_accumulation_doubles_the_calls_not_the_rows() -> None:
    one = profiled("mlp", Loop(micro=1))[2]
    two = profiled("mlp", Loop(micro=2))[2]
    for record in one.records:
        other = two.record(record.path)
        assert other is not None and other.calls == 2 * record.calls


@pytest.mark.parametrize("kind", ["reentrant", "non-reentrant"])
def test_checkpointed_blocks_get_their_backward(kind: str) -> None:
    bare, run, session = profiled(f"transformer:{kind}", Loop())
    assert bitwise_equal(bare, run)
    assert_attributed(run, session)
    for path in ("blocks.0.fc1", "blocks.1.qkv"):
        record = session.record(path)
        assert record is not None
        names = {op.name for op in record.ops if op.backward}
        assert "autograd::engine::evaluate_function: AddmmBackward0" in names, (path, kind)


def test_grad_scaler_is_the_optimizers() -> None:
    loop = Loop(autocast=torch.float16, scaler=True)
    bare, run, session = profiled("mlp", loop)
    assert bitwise_equal(bare, run)
    assert session.optimizer is not None
    parts = {p.name: p for p in session.optimizer.parts}
    assert parts["grad_scaler"].cpu_us.median > 0
    op_names = {op.name for op in session.optimizer.ops}
    assert "aten::_amp_foreach_non_finite_check_and_unscale_" in op_names
    assert "aten::_amp_update_scale_" in op_names


def test_a_forward_only_block_prints_torchprofs_table() -> None:
    model = train("mlp", Loop()).task.model
    x = torch.randn(16, 32)
    with hybridprof.Profile(model) as prof:
        model(x)
        model(x)
    printed = str(prof)
    assert "backward" not in printed
    assert "(optimizer)" not in printed and "(outside modules)" not in printed
    assert printed.splitlines()[0].split("|")[-1].strip() == "Number of Calls"
    session = prof.session()
    assert not session.backward and session.optimizer is None and session.steps == 0
    # the table from the layer ranges and the full session's agree
    assert str(prof) == printed


def test_the_optimizer_alone_is_a_training_block() -> None:
    trained = train("mlp", Loop(scheduler=False))
    model = trained.task.model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 32)).sum().backward()
    with hybridprof.Profile(model) as prof:
        optimizer.step()
    session = prof.session()
    assert session.optimizer is not None and not session.backward
    assert "(optimizer)" in str(prof)


def test_the_users_mode_changes_are_kept() -> None:
    model = train("mlp", Loop()).task.model
    model.train()
    with hybridprof.Profile(model, leaves_only=False):
        model(torch.randn(2, 32))
        model.eval()
    assert not model.training and not any(m.training for m in model.modules())
