"""Compiled code that ran before the profile: found by dynamo's cache entries, swapped for a
hooked compile of the same code, and put back exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.runtime.compiled.compile_again import (
    HookedBackend,
    compiled_again,
    hooked_backend,
    own_recompile,
    warm_paths,
)
from tests.compiled_models import counters

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).relu()


def test_the_hooked_backend_calls_the_users_under_another_identity() -> None:
    calls: list[int] = []

    def user_backend(graph: object, inputs: object) -> str:
        calls.append(1)
        return "compiled"

    hooked = hooked_backend(user_backend)
    assert hooked is hooked_backend(user_backend)  # one per user backend: dynamo reuses its entry
    assert hooked != user_backend and isinstance(hooked, HookedBackend)
    assert hooked(None, []) == "compiled" and calls == [1]


def test_only_a_backend_mismatch_is_hybridprofs_own_recompile() -> None:
    assert own_recompile("0/1: BACKEND_MATCH failure: torch.compile detected different backend")
    assert not own_recompile("0/1: tensor 'x' size mismatch at index 0. expected 4, actual 8")


def test_a_compiled_model_never_called_is_not_compiled_again() -> None:
    model = torch.compile(Tiny())
    assert warm_paths(model) == frozenset()
    with compiled_again(model) as again:
        assert again == ()


def test_warm_code_is_swapped_and_put_back_even_when_the_block_fails() -> None:
    inner = Tiny()
    model = torch.compile(inner)
    model(torch.randn(2, 4))  # compiled by the user, before any profile
    before = dict(vars(model))
    assert warm_paths(model) == frozenset({""})
    with pytest.raises(RuntimeError, match="the profile failed"), compiled_again(model) as again:
        assert again == ("",)
        assert vars(model)["forward"] is not before["forward"]
        raise RuntimeError("the profile failed")
    assert vars(model).keys() == before.keys()
    assert all(vars(model)[k] is v for k, v in before.items())
    # Another compile of the same code with the same settings is warm as well: its backend
    # equals the user's, and dynamo runs the user's entries for it (its first call compiles
    # nothing), so the profile must compile it again too.
    inner.compile()
    assert warm_paths(inner) == frozenset({""})
    before_frames = counters()[0]
    inner(torch.randn(2, 4))
    assert counters()[0] == before_frames
