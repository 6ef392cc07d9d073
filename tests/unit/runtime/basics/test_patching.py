"""ForwardPatcher: patches route through the strategy call, and restore leaves modules exactly as
before."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch
from torch import nn

from hybridprof.runtime.basics.patching import COPY_GUARDS, ForwardPatcher, live_patches


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any:
        self.calls.append(path)
        return forward(*args, **kwargs)


class Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyError("boom inside")


def small() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))


def test_calls_route_through_strategy_and_restore_deletes_attribute() -> None:
    model, rec = small(), Recorder()
    with ForwardPatcher(model, ["0", "2", "2.0"], rec):
        assert set(live_patches()) == {"0 (Linear)", "2 (Sequential)", "2.0 (Linear)"}
        model(torch.ones(1, 3))
    assert rec.calls == ["0", "2", "2.0"]
    assert all("forward" not in m.__dict__ for m in model.modules())
    assert live_patches() == ()


def test_own_instance_forward_gets_the_same_object_back() -> None:
    model, rec = small(), Recorder()
    own = model[1].forward  # a bound method stored as an instance attribute by the user

    def custom(x: torch.Tensor) -> torch.Tensor:
        return own(x) * 2

    model[1].forward = custom
    with ForwardPatcher(model, ["1"], rec):
        out = model(torch.ones(1, 3))
    assert model[1].__dict__["forward"] is custom and rec.calls == ["1"]
    assert torch.equal(out, small()[2](torch.relu(small()[0](torch.ones(1, 3))) * 2))


def test_hooks_keep_firing() -> None:
    model, seen = small(), []
    model[0].register_forward_pre_hook(lambda m, a: seen.append("pre"))
    model[0].register_forward_hook(lambda m, a, o: seen.append("post"))
    with ForwardPatcher(model, ["0"], Recorder()):
        model(torch.ones(1, 3))
    assert seen == ["pre", "post"]


def test_exception_propagates_unchanged_with_innermost_path() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Sequential(Boom()))
    error = None
    patcher = ForwardPatcher(model, ["1", "1.0"], Recorder())
    with pytest.raises(KeyError) as info, patcher:
        model(torch.ones(1, 3))
    error = info.value
    assert error.args == ("boom inside",) and patcher.failed_path == "1.0"
    assert "forward" not in model[1][0].__dict__ and live_patches() == ()


def test_shared_module_patched_once() -> None:
    block = nn.Linear(2, 2)
    model = nn.Sequential(block, block)
    rec = Recorder()
    with ForwardPatcher(model, ["0", "1"], rec):
        assert live_patches() == ("0 (Linear)",)
        model(torch.ones(1, 2))
    assert rec.calls == ["0", "0"]


def test_train_eval_flags_restored() -> None:
    model = small().eval()
    with ForwardPatcher(model, ["0"], Recorder()):
        model.train()
    assert not any(m.training for m in model.modules())


def test_deepcopy_while_patched_computes_with_the_copy() -> None:
    model, rec = small(), Recorder()
    with ForwardPatcher(model, ["0", "2.0"], rec):
        clone = copy.deepcopy(model)
        with torch.no_grad():
            clone[0].weight.zero_()
            clone[0].bias.fill_(1.0)
        out = clone(torch.ones(1, 3))
    assert rec.calls == []  # the copy never reaches the profiler
    # the copy is a plain module: no instance forward, no hybridprof attribute at all
    assert not {"forward", *COPY_GUARDS} & set(clone[0].__dict__)
    expected = clone[2][0](torch.ones(1, 4))
    assert torch.equal(out, expected)


def test_torch_save_of_patched_model_loads_an_inert_forward() -> None:
    model = small()
    buffer = io.BytesIO()
    with ForwardPatcher(model, ["0"], Recorder()):
        torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    x = torch.ones(1, 3)
    assert torch.equal(loaded(x), model(x))


def test_patch_twice_refused() -> None:
    patcher = ForwardPatcher(small(), ["0"], Recorder())
    with patcher, pytest.raises(RuntimeError, match="already active"):
        patcher.patch()


def test_stray_wrapper_after_restore_bypasses_the_strategy() -> None:
    model, rec = small(), Recorder()
    with ForwardPatcher(model, ["0"], rec):
        stray = model[0].forward  # a reference to the wrapper, kept past the block
        shallow = copy.copy(model[0])  # made through the patched module's __getstate__
    x = torch.ones(1, 3)
    assert torch.equal(stray(x), model[0](x)) and rec.calls == []
    assert torch.equal(shallow(x), model[0](x)) and rec.calls == []
    assert "forward" not in shallow.__dict__
