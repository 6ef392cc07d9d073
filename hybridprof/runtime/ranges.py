"""The profiler range a strategy opens around each selected layer call, chosen once by compat."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch


def range_factory(fast_ranges: str) -> Callable[[str], AbstractContextManager[Any]]:
    """`Compat.fast_ranges` -> a callable making a named range.

    The private `_RecordFunctionFast` costs ~2-4 us per range while profiling; the public
    `record_function` ~12-25 us, which alone breaks the overhead target on models of many small
    layers, so it is only the fallback for a torch without the fast one.
    """
    if fast_ranges == "record_function_fast":
        fast: Callable[[str], AbstractContextManager[Any]] = torch._C._profiler._RecordFunctionFast
        return fast
    return torch.autograd.profiler.record_function
