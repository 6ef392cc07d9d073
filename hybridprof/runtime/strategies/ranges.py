"""What the profiling strategies open, as the compat choices say: a profiler, and a range per layer
call."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

from hybridprof.runtime.strategies.base import StrategyConfig


def range_factory(fast_ranges: str) -> Callable[[str], AbstractContextManager[Any]]:
    """`Compat.fast_ranges` -> a callable making a named range.

    The private `_RecordFunctionFast` is cheap per range while profiling; the public
    `record_function` costs several times more, which alone breaks the overhead target on models
    of many small layers, so it is only the fallback for a torch without the fast one (figures:
    benchmarks/README.md, "Measured in passing").
    """
    if fast_ranges == "record_function_fast":
        fast: Callable[[str], AbstractContextManager[Any]] = torch._C._profiler._RecordFunctionFast
        return fast
    return torch.autograd.profiler.record_function


def new_autograd_profiler(config: StrategyConfig) -> Any:
    """An autograd profiler (not yet started) with the arguments this torch accepts.

    Memory is asked for only where compat found `profile_memory` supported, and device timing
    through whichever of `use_device` / `use_cuda` this torch has.
    """
    kwargs: dict[str, Any] = {}
    if config.profile_memory and config.compat.profile_memory:
        kwargs["profile_memory"] = True
    if config.record_shapes:
        kwargs["record_shapes"] = True
    if config.use_device:
        arg = config.compat.profiler_device_arg
        kwargs[arg] = "cuda" if arg == "use_device" else True
        # Without use_kineto the autograd profiler falls back to timing each op with CUDA events
        # ("legacy" mode): no kernel events, so nothing links device time to a layer. With it,
        # Kineto records every kernel with the correlation id of the op that launched it.
        kwargs["use_kineto"] = True
    return torch.autograd.profiler.profile(**kwargs)
