"""Ranges for modules that run eagerly inside compiled code: after a graph break, or in a frame
dynamo skipped, a module's `forward` runs as ordinary Python.

Such a module cannot be patched (dynamo guards on `forward` not being an instance attribute of
every module it traces, and would trace the patch), so the range comes from a profile function
(`sys.setprofile`), which dynamo never sees: on entering `nn.Module._call_impl` for one of these
modules it opens a profiler range named by the module's path, and closes it when that call
returns. Compiled frames inline their modules' calls, so only eager calls reach it. It costs a
Python call per function call while on, so it is on only when warm-up saw a graph break or a
frame dynamo ran eagerly, and only around the measured steps. A profile function the process had
(a debugger, coverage) is put back afterwards.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import Any

import torch
from torch import nn

from hybridprof.runtime.events.attribution import range_name

_RANGE = torch._C._profiler._RecordFunctionFast


class IslandRanges:
    """The profile function: module id -> path for the modules inside compiled code."""

    def __init__(self, paths: Mapping[int, str]) -> None:
        self.paths = dict(paths)
        self.names = {range_name(path): path for path in self.paths.values()}
        # Named up front: the profile function calls no Python function (a frame dynamo's hook
        # would see, and count, when it runs inside a compiled region).
        self._range_names = {key: range_name(path) for key, path in self.paths.items()}
        self._code = nn.Module._call_impl.__code__
        self._open: dict[int, Any] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code is self._code:
                name = self._range_names.get(id(frame.f_locals.get("self")))
                if name is not None:
                    handle = _RANGE(name)
                    handle.__enter__()
                    self._open[id(frame)] = handle
        elif event == "return" and self._open:
            handle = self._open.pop(id(frame), None)
            if handle is not None:
                handle.__exit__(None, None, None)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        previous = sys.getprofile()
        _skip_in_dynamo(self.__call__)
        sys.setprofile(self)
        try:
            yield
        finally:
            sys.setprofile(previous)
            for handle in self._open.values():  # a call that raised out of the step
                with contextlib.suppress(Exception):
                    handle.__exit__(None, None, None)
            self._open.clear()


def _skip_in_dynamo(function: Any) -> None:
    """Dynamo's frame hook is live inside compiled regions: without this it would try to compile
    the profile function itself the first time it runs there (one frame more in its counters)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if eval_frame is not None and code is not None and hasattr(eval_frame, "skip_code"):
        eval_frame.skip_code(code)


__all__ = ["IslandRanges"]
