"""The model is left exactly as it was, on every path, and what cannot be measured is refused."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.errors import UsageError

QUICK: dict[str, Any] = {"warmup": 1, "iters": 2}
STRATEGIES = ("session", "per-call", "timer")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.norm(self.fc(x))))


def snapshot(model: nn.Module) -> dict[str, Any]:
    """Everything of a model a profile could change, comparable with `==` after `same()`."""
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        "dicts": [sorted(m.__dict__) for m in model.modules()],
    }


def assert_same(before: dict[str, Any], model: nn.Module) -> None:
    after = snapshot(model)
    assert after["training"] == before["training"]
    assert after["requires_grad"] == before["requires_grad"]
    assert after["dicts"] == before["dicts"]
    assert before["state"].keys() == after["state"].keys()
    for key, value in before["state"].items():
        assert torch.equal(value, after["state"][key]), key
    for old, new in zip(before["grads"], after["grads"], strict=True):
        assert (old is None) == (new is None)
        if old is not None:
            assert torch.equal(old, new)


# --- 2: a backward set-up that fails half-way is undone --------------------------------------


def test_backward_with_an_inference_mode_parameter_is_refused_and_undone() -> None:
    model = Net().eval()
    model.fc.weight.requires_grad_(False)  # frozen: must stay frozen
    model.head.weight.grad = torch.full_like(model.head.weight, 7.0)  # must survive
    with torch.inference_mode():
        model.late = nn.Linear(4, 4)  # an inference tensor parameter, made last
    before = snapshot(model)
    with pytest.raises(UsageError, match=r"late\.weight.*inference") as caught:
        hybridprof.profile(model, torch.rand(8, 4), backward=True, **QUICK)
    assert "\n" not in str(caught.value)
    assert_same(before, model)


def test_cli_names_the_inference_mode_parameter(tmp_path: Path) -> None:
    model_file = tmp_path / "frozen.py"
    model_file.write_text(
        "import torch\nfrom torch import nn\n\n"
        "def build_model():\n"
        "    with torch.inference_mode():\n"
        "        return nn.Sequential(nn.Linear(4, 4), nn.ReLU())\n\n"
        "def example_inputs():\n    return (torch.rand(2, 4),)\n"
    )
    script = Path(sys.executable).with_name("hybridprof")
    argv = [str(script), "run", str(model_file), "--backward", "--warmup", "0", "--iters", "1"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'0.weight'" in lines[0] and "inference_mode" in lines[0]


# --- 3: a forward-only profile in train mode keeps BatchNorm's statistics ---------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_forward_profile_in_train_mode_keeps_buffers(strategy: str) -> None:
    model = Net().train()
    before = snapshot(model)
    hybridprof.profile(model, torch.rand(8, 4), strategy=strategy, **QUICK)
    assert_same(before, model)


def test_profile_does_not_move_the_callers_random_stream() -> None:
    model = Net().train()  # Dropout draws random numbers
    torch.manual_seed(1)
    hybridprof.profile(model, torch.rand(8, 4), **QUICK)
    after_profile = torch.rand(3)
    torch.manual_seed(1)
    torch.rand(8, 4)
    assert torch.equal(after_profile, torch.rand(3))


# --- 4: optimizer-in-backward hooks would change the weights ----------------------------------


def test_backward_refuses_post_accumulate_grad_hooks() -> None:
    model = Net()
    optimizers = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}

    def optimizer_hook(parameter: torch.Tensor) -> None:
        optimizers[parameter].step()
        optimizers[parameter].zero_grad()

    for parameter in model.parameters():
        parameter.register_post_accumulate_grad_hook(optimizer_hook)
    before = snapshot(model)
    with pytest.raises(UsageError, match="optimizer_hook") as caught:
        hybridprof.profile(model, torch.rand(8, 4), backward=True, **QUICK)
    assert "register_post_accumulate_grad_hook" in str(caught.value)
    assert_same(before, model)
    assert all(not o.state for o in optimizers.values())


# --- 5: copies made while profiling compute with their own weights, carry no hybridprof -------


def test_a_data_parallel_replica_made_while_profiling_uses_its_own_weights() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    x = torch.rand(2, 3)
    with hybridprof.Profile(model) as prof:
        replica = model._replicate_for_data_parallel()
        inner = model[0]._replicate_for_data_parallel()
        replica._modules["0"] = inner
        inner._parameters["weight"] = torch.zeros(3, 3)
        inner._parameters["bias"] = torch.ones(3)
        assert torch.equal(replica(x), torch.ones(2, 3))
        model(x)
    assert "forward" not in inner.__dict__ and "forward" not in replica.__dict__
    assert prof.session().record("0").calls == 1  # the replica's call is not the model's


def test_a_model_saved_while_profiled_loads_without_hybridprof(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    with hybridprof.Profile(model):
        torch.save(model, tmp_path / "whole.pt")
        buffer = io.BytesIO()
        torch.save(model[0], buffer)
        shallow = copy.copy(model[0])
        deep = copy.deepcopy(model)
    assert "forward" not in shallow.__dict__ and "forward" not in deep[0].__dict__
    assert not any("hybridprof" in repr(v) for v in vars(deep[0]).values())
    code = (
        "import sys, torch\n"
        "sys.modules['hybridprof'] = None  # importing it fails\n"
        f"m = torch.load({str(tmp_path / 'whole.pt')!r}, weights_only=False)\n"
        "print(type(m).__name__, 'forward' in vars(m[0]), m(torch.rand(1, 3)).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Sequential", "False", "torch.Size([1,", "3])"]


# --- 6: calls from other threads are not measured, and said so -------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_calls_from_other_threads_are_left_out_with_a_warning(strategy: str) -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    x = torch.rand(32, 64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with hybridprof.Profile(model, strategy=strategy) as prof:
            workers = [threading.Thread(target=lambda: [model(x) for _ in range(20)])]
            for worker in workers:
                worker.start()
            for _ in range(5):
                model(x)
            for worker in workers:
                worker.join()
    session = prof.session()
    for record in session.records:
        assert record.calls == 5  # this thread's calls, all of them
        assert record.self_cpu_us.median >= 0 and record.total_cpu_us.median >= 0
    said = [w for w in session.warnings if "other threads" in w]
    assert said and "40 calls" in said[0]
    assert any("other threads" in str(w.message) for w in caught)


# --- 7: nested profilers are refused ----------------------------------------------------------


def test_profile_inside_a_profile_block_is_refused() -> None:
    model = Net().eval()
    with hybridprof.Profile(model):
        with pytest.raises(UsageError, match="another hybridprof profile is active"):
            hybridprof.profile(model, torch.rand(8, 4), **QUICK)
        other = nn.Linear(2, 2)
        with (
            pytest.raises(UsageError, match="another hybridprof profile"),
            hybridprof.Profile(other),
        ):
            pass
        model(torch.rand(8, 4))


@pytest.mark.parametrize("strategy", ("session", "per-call"))
def test_a_profile_inside_torch_profiler_is_refused(strategy: str) -> None:
    model = Net().eval()
    before = snapshot(model)
    with torch.profiler.profile():
        with (
            pytest.raises(UsageError, match=r"torch\.profiler"),
            hybridprof.Profile(model, strategy=strategy),
        ):
            pass
        with pytest.raises(UsageError, match=r"torch\.profiler"):
            hybridprof.profile(model, torch.rand(8, 4), strategy=strategy, **QUICK)
    assert_same(before, model)


def test_the_timer_strategy_runs_inside_torch_profiler() -> None:
    model = Net().eval()
    with torch.profiler.profile() as outer:
        session = hybridprof.profile(model, torch.rand(8, 4), strategy="timer", **QUICK)
    assert session.record("fc") is not None and session.record("fc").calls == 2
    assert any(e.name == "aten::addmm" for e in outer.events())


# --- 16: messages blame the right thing -------------------------------------------------------


class BadBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no gradient for you")


class LeafWithBadBackward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = BadBackward.apply(x)
        return result


def test_a_backward_failure_is_called_a_backward_failure() -> None:
    model = nn.Sequential(nn.Linear(4, 4), LeafWithBadBackward())
    before = snapshot(model)
    with pytest.raises(hybridprof.HybridprofError) as caught:
        hybridprof.profile(model, torch.rand(2, 4), backward=True, **QUICK)
    message = str(caught.value)
    assert message.startswith("the backward pass of Sequential failed: no gradient for you")
    assert "outside the profiled layers" not in message
    assert_same(before, model)


@pytest.mark.parametrize("block", (torch.no_grad, torch.inference_mode))
def test_backward_under_no_grad_blames_the_block(block: Any) -> None:
    model = Net()
    with block(), pytest.raises(UsageError, match=r"inside torch.no_grad\(\) or torch.inference"):
        hybridprof.profile(model, torch.rand(8, 4), backward=True, **QUICK)


def test_sys_exit_in_forward_is_a_model_failure() -> None:
    class Quits(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sys.exit(0)

    model = nn.Sequential(nn.Linear(4, 4), Quits())
    with pytest.raises(hybridprof.HybridprofError, match=r"1 \(Quits\): it called sys.exit\(0\)"):
        hybridprof.profile(model, torch.rand(2, 4), **QUICK)


def test_a_bypassed_layer_is_not_blamed_on_a_fused_fast_path() -> None:
    class Bypass(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return nn.functional.linear(x, self.fc.weight, self.fc.bias)  # never calls self.fc

    # leaves only: with the complete selection the root runs, so "none was called" cannot happen
    session = hybridprof.profile(Bypass(), torch.rand(2, 4), leaves_only=True, **QUICK)
    said = " ".join(session.warnings)
    assert "none of the 1 selected layer was called through its module" in said
    assert "F.linear on a layer's weight" in said
