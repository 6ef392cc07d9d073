"""The tensors inside a nested value (a model's inputs or outputs): one walk that the workload
(the loss over every output) and the memory capture (the inputs' storages) share, kept below
both so neither imports the other."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import torch


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Tensors in an output structure, depth first, in order (tuples, lists, dicts, dataclasses)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from iter_tensors(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from iter_tensors(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from iter_tensors(getattr(value, f.name))
