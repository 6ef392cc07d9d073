"""The runner on real CPU torch: iterations, shapes, plans, failures, Ctrl-C, restoring the
model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.errors import DeviceError, ModelRunError, UsageError
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.basics.workload import describe


class Pair(nn.Module):
    """Returns a tuple, so output shapes of a multi-output layer are checked."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x.sum(dim=1)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 24), nn.ReLU())
        self.pair = Pair()
        self.head = nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.pair(self.features(x))
        return self.head(hidden)


class Explode(nn.Module):
    """Raises `error` on call number `on_call` (counting from 1)."""

    def __init__(self, error: BaseException, on_call: int) -> None:
        super().__init__()
        self.error, self.on_call, self.calls = error, on_call, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.on_call:
            raise self.error
        return x


def assert_restored(model: nn.Module, training: bool) -> None:
    assert not live_patches()
    for module in model.modules():
        assert "forward" not in module.__dict__
        assert module.training is training


def test_leaves_measured_over_iterations_with_shapes() -> None:
    model = Net().eval()
    session = profile(model, torch.rand(5, 12), warmup=2, iters=3, leaves_only=True)
    paths = {r.path for r in session.records}
    assert paths == {"features.0", "features.1", "pair", "head"}
    assert all(r.calls == 3 for r in session.records)  # warm-up calls are not counted
    assert session.iterations == 3 and session.requested_iterations == 3 and session.warmup == 2
    assert len(session.iteration_cpu_us) == 3
    assert not session.interrupted and not session.backward
    pair = session.record("pair")
    assert pair is not None
    assert pair.input_shapes == ("5x24",) and pair.output_shapes == ("5x24", "5")
    head = session.record("head")
    assert head is not None and head.output_shapes == ("5x3",) and head.param_count == 24 * 3 + 3
    assert session.started_at and session.duration_s > 0
    assert_restored(model, training=False)


def test_outputs_unchanged_and_no_grad_state_left() -> None:
    model = Net().train()
    x = torch.rand(4, 12)
    before = model(x)
    profile(model, (x,), warmup=0, iters=1, paths=["features"])
    after = model(x)
    assert torch.equal(before, after)
    assert all(p.grad is None for p in model.parameters())
    assert_restored(model, training=True)


def test_selection_by_glob_depth_and_kwargs_inputs() -> None:
    model = Net()
    session = profile(model, {"x": torch.rand(2, 12)}, globs=["features.*"], warmup=0, iters=1)
    assert {r.path for r in session.records} == {"features.0", "features.1"}
    by_depth = profile(model, {"x": torch.rand(2, 12)}, depth=1, warmup=0, iters=1)
    assert {r.path for r in by_depth.records} == {"features", "pair", "head"}
    features = by_depth.record("features")
    assert features is not None and features.input_shapes == ("2x12",)


def test_forward_failure_names_the_layer_and_restores() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    model.add_module("classifier", nn.Sequential(nn.Linear(64, 10)))
    with pytest.raises(ModelRunError) as info:
        profile(model, torch.rand(4, 16), warmup=1, iters=2)
    assert str(info.value) == (
        "forward failed in classifier.0 (Linear): "
        "mat1 and mat2 shapes cannot be multiplied (4x32 and 64x10); "
        "check that the inputs fit the model"
    )
    assert_restored(model, training=True)


def test_non_runtime_error_keeps_its_type_in_the_message() -> None:
    model = nn.Sequential(nn.Linear(4, 4), Explode(ValueError("bad value"), on_call=2))
    with pytest.raises(
        ModelRunError, match=r"forward failed in 1 \(Explode\): ValueError: bad value"
    ):
        profile(model, torch.rand(1, 4), warmup=1, iters=2)
    assert_restored(model, training=True)


def test_ctrl_c_on_third_iteration_keeps_two_and_marks_interrupted() -> None:
    # one warm-up call, then two calls per measured iteration (its warm step, then the measured
    # step): calls 2-3 and 4-5 are iterations 1 and 2, call 6 interrupts the third
    model = nn.Sequential(
        nn.Linear(8, 8), Explode(KeyboardInterrupt(), on_call=6), nn.ReLU()
    ).eval()
    session = profile(model, torch.rand(2, 8), warmup=1, iters=10)
    assert session.interrupted
    assert session.iterations == 2 and session.requested_iterations == 10
    assert all(r.calls == 2 for r in session.records)
    assert any("interrupted after 2 of 10" in w for w in session.warnings)
    assert_restored(model, training=False)


def test_ctrl_c_during_warmup_propagates_and_restores() -> None:
    model = nn.Sequential(nn.Linear(8, 8), Explode(KeyboardInterrupt(), on_call=1))
    with pytest.raises(KeyboardInterrupt):
        profile(model, torch.rand(2, 8), warmup=2, iters=2)
    assert_restored(model, training=True)


def test_progress_reports_warmup_then_measured() -> None:
    seen: list[tuple[str, int, int]] = []
    profile(Net(), torch.rand(2, 12), warmup=2, iters=3, progress=lambda *a: seen.append(a))
    assert seen == [
        ("warmup", 0, 2),
        ("warmup", 1, 2),
        ("warmup", 2, 2),
        ("measure", 0, 3),
        ("measure", 1, 3),
        ("measure", 2, 3),
        ("measure", 3, 3),
    ]


@pytest.mark.usefixtures("waits_unknown")  # no "lost to other processes" line on a busy machine
def test_plan_selects_exactly_its_paths() -> None:
    model = Net()
    plan = tree_plan(model, paths=["head", "features.1"])
    session = profile(model, torch.rand(2, 12), plan=plan, warmup=0, iters=1)
    assert {r.path for r in session.records} == {"head", "features.1"}
    assert session.plan.selected_paths() == plan.selected_paths()
    assert not session.warnings


def test_plan_from_another_model_is_a_clear_error() -> None:
    plan = tree_plan(nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU())), leaves_only=True)
    with pytest.raises(
        UsageError,
        match=r"the plan's paths '0', '1.0' are not in this model "
        r"\(Net, the plan was made for Sequential\)",
    ):
        profile(Net(), torch.rand(2, 12), plan=plan, warmup=0, iters=1)


def test_plan_from_another_torch_warns_and_reprobes() -> None:
    model = Net()
    plan = replace(tree_plan(model), torch_version="1.13.1", compat=())
    session = profile(model, torch.rand(2, 12), plan=plan, warmup=0, iters=1)
    assert any("torch 1.13.1" in w and "probed again" in w for w in session.warnings)
    assert session.plan.torch_version == torch.__version__
    assert session.plan.compat  # the fresh choices are recorded


def test_bad_counts_and_unknown_strategy() -> None:
    with pytest.raises(UsageError, match="iterations must be 1 or more"):
        profile(Net(), torch.rand(2, 12), iters=0)
    with pytest.raises(UsageError, match="unknown strategy 'fast'"):
        profile(Net(), torch.rand(2, 12), strategy="fast", warmup=0, iters=1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_without_cuda_is_a_device_error() -> None:
    with pytest.raises(DeviceError, match="CUDA is not available"):
        profile(Net(), torch.rand(2, 12), device="cuda")


def test_describe_values() -> None:
    assert describe(torch.rand(2, 3)) == "2x3"
    assert describe(torch.tensor(1.0)) == "scalar"
    assert describe((torch.rand(1), None, [torch.rand(4, 4)])) == "(1, None, [4x4])"
    assert describe(3) == "int"


def test_failed_run_leaves_no_trace_but_interrupted_one_does(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    model = nn.Sequential(nn.Linear(16, 32), nn.Linear(64, 10))
    with pytest.raises(ModelRunError):
        profile(model, torch.rand(4, 16), warmup=0, iters=2, trace_path=str(trace))
    assert not trace.exists()
    stopped = nn.Sequential(nn.Linear(8, 8), Explode(KeyboardInterrupt(), on_call=3))
    session = profile(stopped, torch.rand(2, 8), warmup=0, iters=5, trace_path=str(trace))
    assert session.interrupted and session.trace_file == str(trace)
    assert trace.is_file()


def test_a_model_caching_tensors_can_be_trained_after_profiling() -> None:
    """Why forwards run under no_grad, not inference_mode: a cache made while profiling must not
    be an inference tensor, which autograd refuses to save for backward."""

    class Cached(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.scale: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.scale is None:
                self.scale = torch.full_like(x, 2.0)
            return self.fc(x) * self.scale

    model = Cached()
    profile(model, torch.rand(2, 3), warmup=0, iters=1)
    model(torch.rand(2, 3)).sum().backward()
    assert model.fc.weight.grad is not None


def test_a_model_spread_over_devices_is_refused_with_a_device() -> None:
    model = Net()
    model.register_buffer("elsewhere", torch.empty(2, device="meta"))
    with pytest.raises(UsageError, match=r"spread over several devices \(cpu, meta\)"):
        profile(model, torch.rand(2, 12), device="cpu", warmup=0, iters=1)
    assert_restored(model, training=True)


def test_library_entry_point_is_the_runner() -> None:
    import hybridprof

    assert hybridprof.profile is profile


def test_threads_option_applies_during_the_run_and_is_restored() -> None:
    import hybridprof
    from hybridprof.errors import UsageError

    before = torch.get_num_threads()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    session = hybridprof.profile(model, torch.rand(2, 4), warmup=0, iters=1, threads=1)
    assert session.environment.threads == 1
    assert torch.get_num_threads() == before
    with pytest.raises(UsageError, match="--threads must be 1 or more"):
        hybridprof.profile(model, torch.rand(2, 4), iters=1, threads=0)
