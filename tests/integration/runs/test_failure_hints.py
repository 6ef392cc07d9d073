"""A forward failure says "check that the inputs fit the model" only when the error is about the
inputs' shapes, dtypes or values; a bug inside a layer names its file and line instead."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.errors import ModelRunError

HERE = __file__


class Buggy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = {"a": 1.0}["b"]  # a bug in the layer, whatever the inputs
        return x * scale


def _line_of(text: str) -> int:
    with open(HERE, encoding="utf-8") as source:
        return next(i for i, line in enumerate(source, 1) if text in line)


def failure(model: nn.Module, x: torch.Tensor) -> str:
    with pytest.raises(ModelRunError) as info:
        profile(model, x, warmup=0, iters=1)
    return str(info.value)


def test_a_bug_in_a_layer_names_its_file_and_line() -> None:
    message = failure(nn.Sequential(nn.Linear(4, 4), Buggy()), torch.rand(2, 4))
    line = _line_of('{"a": 1.0}["b"]')
    assert message.startswith("forward failed in 1 (Buggy): KeyError: 'b'; at ")
    assert message.endswith(f"test_failure_hints.py:{line} in forward")
    assert "check that the inputs" not in message


def test_inputs_that_do_not_fit_say_so() -> None:
    message = failure(nn.Sequential(nn.Linear(8, 4)), torch.rand(2, 5))
    assert message.endswith("(2x5 and 8x4); check that the inputs fit the model")
    tokens = torch.tensor([[3, 99]])  # an id past the vocabulary
    message = failure(nn.Sequential(nn.Embedding(10, 4)), tokens)
    assert message.endswith("check that the inputs fit the model"), message
    message = failure(nn.Sequential(nn.Linear(4, 4)), torch.rand(2, 4, dtype=torch.float64))
    assert message.endswith("check that the inputs fit the model"), message
