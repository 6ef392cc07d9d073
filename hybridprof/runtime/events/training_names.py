"""The profiler ranges of a training step that are no layer: what names them, and what each means.

Torch opens two by itself, on the calling thread, around every `torch.optim.Optimizer` call:
`Optimizer.step#<Class>.step` and `Optimizer.zero_grad#<Class>.zero_grad` (with the instance's
class name), and every op of the call runs inside. hybridprof opens the others while a window of
steps is profiled (`runtime/training/hooks.py`): one range per step of the with-block, one around
gradient clipping, GradScaler's calls, `nn.Module.zero_grad` and an optimizer's closure, and a
zero-length marker where the optimizer starts each param group. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from hybridprof.runtime.events.fsdp_names import CommKind, fsdp_comm, fsdp_unit
from hybridprof.runtime.events.tp_names import COLLECTIVES, WAIT, tp_hooks_path

STEP_RANGE = "hybridprof::step"  # one measured step of the with-block
WARMUP_RANGE = "hybridprof::warmup"  # a warm-up step: run under the profiler, its events dropped
CLOSURE_RANGE = "hybridprof::closure"  # the closure an optimizer step calls (Lightning's)
CLIP_RANGE = "hybridprof::clip_grad"
SCALER_RANGE = "hybridprof::grad_scaler"
ZERO_GRAD_RANGE = "hybridprof::zero_grad"  # nn.Module.zero_grad (HF's Trainer zeroes this way)
GROUP_PREFIX = "hybridprof::group:"  # + the param group's index
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
OPTIMIZER_ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "

# What a range is: a part of the optimizer ("part:<name>"), a closure (nothing inside is the
# optimizer's), a param group's marker, or a step range.
Special = Literal[
    "part:step", "part:zero_grad", "part:clip_grad", "part:grad_scaler", "closure", "group", "step"
]

_EXACT: dict[str, Special] = {
    CLOSURE_RANGE: "closure",
    CLIP_RANGE: "part:clip_grad",
    SCALER_RANGE: "part:grad_scaler",
    ZERO_GRAD_RANGE: "part:zero_grad",
    STEP_RANGE: "step",
    WARMUP_RANGE: "step",
}


def special_kind(name: str) -> Special | None:
    """What the range `name` is in a training step, or None (an op, a layer, a backward node)."""
    kind = _EXACT.get(name)
    if kind is not None:
        return kind
    if name.startswith(OPTIMIZER_STEP_PREFIX):
        return "part:step"
    if name.startswith(OPTIMIZER_ZERO_GRAD_PREFIX):
        return "part:zero_grad"
    if name.startswith(GROUP_PREFIX):
        return "group"
    return None


# An FSDP2 communication range, for the walk: ("comm", its kind, the unit's path); another FSDP2
# range working for a unit (its hooks, a prefetch): ("fsdp", the unit's path, backward work).
CommEntry = tuple[Literal["comm"], CommKind, str]
UnitEntry = tuple[Literal["fsdp"], str, bool]
# A tensor-parallel layer's hooks range: ("hooks", its path); a functional collective or a wait
# for one: ("tp", "collective" | "wait").
HooksEntry = tuple[Literal["hooks"], str]
TpEntry = tuple[Literal["tp"], Literal["collective", "wait"]]
NameEntry = (
    str | tuple[Special | Literal["node"]] | CommEntry | UnitEntry | HooksEntry | TpEntry | None
)


class RangeNames(dict[str, NameEntry]):
    """What each event name is for the walk: a layer's path (the range names it starts with), a
    special range as `(kind,)`, a backward node as `("node",)`, an FSDP2 communication range as
    `("comm", kind, unit path)`, another FSDP2 range for a unit as `("fsdp", unit path,
    backward)`, a tensor-parallel layer's hooks range as `("hooks", path)`, a functional
    collective or its wait as `("tp", "collective" | "wait")`, or None (an op). Worked out once
    per distinct name: the walk asks per event, and an iteration has a few dozen distinct names
    and thousands of events, so one lookup per event answers every question."""

    def __init__(self, layers: Mapping[str, str]) -> None:
        super().__init__(layers)

    def __missing__(self, name: str) -> NameEntry:
        kind: Special | Literal["node"] | None = special_kind(name)
        if kind is None and name.startswith(BACKWARD_PREFIX):
            kind = "node"
        entry: NameEntry = None if kind is None else (kind,)
        comm = fsdp_comm(name) if entry is None else None
        unit = fsdp_unit(name) if entry is None and comm is None else None
        if comm is not None:
            entry = ("comm", *comm)
        elif unit is not None:
            entry = ("fsdp", *unit)
        elif entry is None:
            entry = _tp_entry(name)
        self[name] = entry
        return entry


def _tp_entry(name: str) -> HooksEntry | TpEntry | None:
    hooks = tp_hooks_path(name)
    if hooks is not None:
        return ("hooks", hooks)
    if name in COLLECTIVES:
        return ("tp", "collective")
    return ("tp", "wait") if name == WAIT else None


def needs_the_walk(name: str) -> bool:
    """An event the forward's array passes (`event_columns.py`) do not read: a training step's
    (`is_training_name`), or an FSDP2 range, whose time moves to the unit it serves even in a
    forward alone."""
    return is_training_name(name) or fsdp_unit(name) is not None


def is_training_name(name: str) -> bool:
    """An event that only a training step has: a backward node or an optimizer's range."""
    if name.startswith(BACKWARD_PREFIX):
        return True
    kind = special_kind(name)
    return kind is not None and kind != "step"


def optimizer_class(name: str) -> str:
    """The optimizer class an `Optimizer.step#<Class>.step` range names."""
    return name[len(OPTIMIZER_STEP_PREFIX) :].rsplit(".", 1)[0]


def group_index(name: str) -> int:
    """The param group a marker names (-1 when it names none)."""
    text = name[len(GROUP_PREFIX) :]
    return int(text) if text.isdigit() else -1


__all__ = [
    "BACKWARD_PREFIX",
    "CLIP_RANGE",
    "CLOSURE_RANGE",
    "GROUP_PREFIX",
    "OPTIMIZER_STEP_PREFIX",
    "OPTIMIZER_ZERO_GRAD_PREFIX",
    "SCALER_RANGE",
    "STEP_RANGE",
    "WARMUP_RANGE",
    "ZERO_GRAD_RANGE",
    "CommEntry",
    "HooksEntry",
    "NameEntry",
    "RangeNames",
    "Special",
    "TpEntry",
    "UnitEntry",
    "group_index",
    "is_training_name",
    "needs_the_walk",
    "optimizer_class",
    "special_kind",
]
