"""What dynamo did, read from its own bookkeeping: no `explain()` (it traces again), no logs.

- `torch._dynamo.utils.counters`: frames seen and compiled, unique graphs, graph breaks by reason;
- `get_compilation_metrics()`: one record per frame compile, with its times, the guard that
  failed when it was a recompile (`recompile_reason`), and whether it compiled a backward;
- `graph_break_reasons`: every graph break with its reason and the user's stack (file:line).

A `Snapshot` is taken before and after a stretch of work; `Delta` is what happened in between.
Fields of these private records change between torch releases, so every one is read with a
default.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Snapshot:
    frames: int
    graphs: int
    breaks: int  # graph breaks counted by reason
    last_metric: Any  # the newest compilation record (dynamo keeps only the latest 64)
    reasons: int  # graph-break records so far


@dataclass(frozen=True, slots=True)
class Break:
    reason: str
    file: str
    line: int
    code: str
    frame: str  # the function the break is in


@dataclass(frozen=True, slots=True)
class Delta:
    frames: int
    graphs: int
    breaks: int
    compile_s: float
    backward_compile_s: float
    recompile_reasons: tuple[str, ...]
    graph_breaks: tuple[Break, ...]

    @property
    def compiled(self) -> bool:
        return self.frames > 0 or self.compile_s > 0


def _utils() -> Any:
    return sys.modules.get("torch._dynamo.utils")


def snapshot() -> Snapshot:
    utils = _utils()
    if utils is None:
        return Snapshot(0, 0, 0, None, 0)
    counters = utils.counters
    return Snapshot(
        frames=int(counters["frames"].get("total", 0)),
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        breaks=int(sum(counters["graph_break"].values())),
        last_metric=(_metrics(utils) or [None])[-1],
        reasons=len(getattr(utils, "graph_break_reasons", ())),
    )


def _metrics(utils: Any) -> list[Any]:
    try:
        return list(utils.get_compilation_metrics())
    except Exception:  # a torch without the record keeping
        return []


def since(before: Snapshot) -> Delta:
    """What dynamo did after `before` was taken."""
    after = snapshot()
    utils = _utils()
    records = _newer(_metrics(utils), before.last_metric) if utils is not None else []
    reasons = list(getattr(utils, "graph_break_reasons", ()))[before.reasons :] if utils else []
    forward = [r for r in records if getattr(r, "is_forward", True) is not False]
    backward = [r for r in records if getattr(r, "is_forward", True) is False]
    return Delta(
        frames=after.frames - before.frames,
        graphs=after.graphs - before.graphs,
        breaks=after.breaks - before.breaks,
        compile_s=sum(float(getattr(r, "entire_frame_compile_time_s", 0) or 0) for r in forward),
        backward_compile_s=sum(
            float(getattr(r, "backward_cumulative_compile_time_us", 0) or 0) / 1e6 for r in backward
        ),
        recompile_reasons=tuple(
            f"{getattr(r, 'compile_id', '?')}: {_first_line(r.recompile_reason)}"
            for r in records
            if getattr(r, "recompile_reason", None)
        ),
        graph_breaks=tuple(_break(r) for r in reasons),
    )


def compiled_caller_warning(before: Snapshot) -> str | None:
    """What to say when dynamo compiled while an eager model was profiled: a compiled function
    called it (hybridprof cannot see that caller before it runs). Its patched forwards then ran
    inside compiled code: they stepped aside (no graph break), but dynamo guarded on them."""
    if "torch._dynamo.utils" not in sys.modules:
        return None
    delta = since(before)
    if not delta.compiled:
        return None
    return (
        f"dynamo compiled {delta.frames} frame{'s' if delta.frames != 1 else ''} while the model "
        "was profiled: a torch.compile'd function called it, so its layers ran inside compiled "
        "code and are not measured one by one, and that function may compile again on its next "
        "call; profile the model itself (torch.compile(model) or model.compile()), or let the "
        "compiled function name the model (a global or a closure variable, not an argument): "
        "then its kernels are mapped to the layers"
    )


def _newer(records: list[Any], last: Any) -> list[Any]:
    """The records after `last` (all of them when it is gone or there was none)."""
    if last is None:
        return records
    for index in range(len(records) - 1, -1, -1):
        if records[index] is last:
            return records[index + 1 :]
    return records


def _first_line(text: Any) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else str(text)


def _break(reason: Any) -> Break:
    """A graph break at the user's innermost frame (torch's own frames skipped)."""
    stack = list(getattr(reason, "user_stack", None) or ())
    torch_dir = os.sep + "torch" + os.sep
    user = [f for f in stack if torch_dir not in str(getattr(f, "filename", ""))]
    frame = (user or stack)[-1] if (user or stack) else None
    return Break(
        reason=_first_line(getattr(reason, "reason", "graph break")),
        file=str(getattr(frame, "filename", "")) if frame else "",
        line=int(getattr(frame, "lineno", 0) or 0) if frame else 0,
        code=str(getattr(frame, "line", "") or "").strip() if frame else "",
        frame=str(getattr(frame, "name", "")) if frame else "",
    )


__all__ = ["Break", "Delta", "Snapshot", "compiled_caller_warning", "since", "snapshot"]
