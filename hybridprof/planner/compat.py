"""Decide torch compatibility once, from the installed torch, and say why.

`probe()` inspects the installed torch a single time (signatures and attributes, never by calling
user code and catching TypeError) and returns a `Compat`; `Compat.choices()` gives the same
decisions as `CompatChoice`s with reasons for the plan and the report.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hybridprof.datamodel import CompatChoice


@dataclass(frozen=True, slots=True)
class Compat:
    """The decisions every part of the runtime obeys.

    profiler_device_arg: "use_device" (torch >= 2.x) or "use_cuda" (older; removed in 2.14).
    event_fields: "device" (FunctionEvent.device_time...) or "cuda" (cuda_time...; deprecated).
    profile_memory: the autograd profiler accepts profile_memory.
    children: "lazy_tree" (tree built on first .events()/function_events) or
        "populate_cpu_children" (old EventList method must be called).
    cuda_available: torch.cuda.is_available().
    fast_ranges: "record_function_fast" (private torch._C._profiler._RecordFunctionFast) or
        "record_function" (public, several times dearer per range while profiling).
    raw_events: "kineto" (walk prof.profiler.kineto_results.events() directly) or
        "function_events" (torch's own, far slower post-processing per event).
    (Figures: benchmarks/README.md, "Measured in passing".)
    torch_version: the version probed.
    reasons: name -> why, for each decision.
    """

    profiler_device_arg: str
    event_fields: str
    profile_memory: bool
    children: str
    cuda_available: bool
    fast_ranges: str
    raw_events: str
    torch_version: str
    reasons: tuple[tuple[str, str], ...] = ()

    def choices(self) -> tuple[CompatChoice, ...]:
        reasons = dict(self.reasons)
        values = {
            "profiler_device_arg": self.profiler_device_arg,
            "event_fields": self.event_fields,
            "profile_memory": "supported" if self.profile_memory else "unsupported",
            "children": self.children,
            "cuda_available": "yes" if self.cuda_available else "no",
            "fast_ranges": self.fast_ranges,
            "raw_events": self.raw_events,
        }
        return tuple(CompatChoice(k, v, reasons.get(k, "")) for k, v in values.items())


# --------------------------------------------------------------------------- probing

Decision = tuple[Any, str]  # (value, reason)

# What runtime/events/kineto.py reads from each raw kineto event; all must exist to walk them
# directly.
KINETO_EVENT_FIELDS = (
    "name",
    "start_ns",
    "end_ns",
    "start_thread_id",
    "device_type",
    "nbytes",
    "sequence_nr",
    "fwd_thread_id",
    "correlation_id",
    "linked_correlation_id",
)


@functools.cache
def probe() -> Compat:
    """The compatibility decisions for the installed torch, made once per process."""
    return probe_now()


def probe_now() -> Compat:
    """Probe without the cache (tests simulate older torch APIs by patching torch, then call
    this)."""
    import torch
    import torch.autograd.profiler as autograd_profiler
    from torch.autograd import profiler_util

    profile_cls = autograd_profiler.profile
    decisions = {
        "profiler_device_arg": decide_device_arg(profile_cls),
        "event_fields": decide_event_fields(profiler_util.FunctionEvent),
        "profile_memory": decide_profile_memory(profile_cls),
        "children": decide_children(profiler_util.EventList),
        "cuda_available": decide_cuda(torch),
        "fast_ranges": decide_fast_ranges(torch),
        "raw_events": decide_raw_events(torch),
    }
    return Compat(
        profiler_device_arg=decisions["profiler_device_arg"][0],
        event_fields=decisions["event_fields"][0],
        profile_memory=decisions["profile_memory"][0],
        children=decisions["children"][0],
        cuda_available=decisions["cuda_available"][0],
        fast_ranges=decisions["fast_ranges"][0],
        raw_events=decisions["raw_events"][0],
        torch_version=str(torch.__version__),
        reasons=tuple((name, reason) for name, (_, reason) in decisions.items()),
    )


def _parameters(cls: Any) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # a C-implemented __init__ without a signature
        return {}


def decide_device_arg(profile_cls: Any) -> Decision:
    params = _parameters(profile_cls)
    if "use_device" in params:
        why = "deprecated (FutureWarning)" if "use_cuda" in params else "removed"
        return "use_device", f"autograd profiler accepts use_device; use_cuda is {why}"
    return "use_cuda", "autograd profiler has no use_device argument (torch < 2.1); using use_cuda"


def decide_event_fields(event_cls: Any) -> Decision:
    if hasattr(event_cls, "self_device_time_total"):
        old = "deprecated" if hasattr(event_cls, "self_cuda_time_total") else "gone"
        return "device", f"FunctionEvent has device_* fields; cuda_* names are {old}"
    return "cuda", "FunctionEvent has only cuda_* fields (older torch)"


def decide_profile_memory(profile_cls: Any) -> Decision:
    if "profile_memory" in _parameters(profile_cls):
        return True, "autograd profiler accepts profile_memory"
    return False, "autograd profiler has no profile_memory argument; memory columns stay empty"


def decide_children(event_list_cls: Any) -> Decision:
    if hasattr(event_list_cls, "populate_cpu_children"):
        return "populate_cpu_children", "EventList.populate_cpu_children exists and must be called"
    return "lazy_tree", "EventList builds cpu_children lazily on first access (no populate call)"


def decide_cuda(torch_module: Any) -> Decision:
    available = bool(torch_module.cuda.is_available())
    build = getattr(torch_module.version, "cuda", None)
    if available:
        return True, f"torch.cuda.is_available() (CUDA {build})"
    return False, f"torch.cuda.is_available() is False (build CUDA: {build or 'none, CPU build'})"


def decide_fast_ranges(torch_module: Any) -> Decision:
    if hasattr(getattr(torch_module._C, "_profiler", None), "_RecordFunctionFast"):
        return "record_function_fast", "private _RecordFunctionFast present (~2-4 us per range)"
    return "record_function", "no _RecordFunctionFast; public record_function (~12-25 us)"


def decide_raw_events(torch_module: Any) -> Decision:
    autograd_c = getattr(torch_module._C, "_autograd", None)
    result_cls = getattr(autograd_c, "_ProfilerResult", None)
    event_cls = getattr(autograd_c, "_KinetoEvent", None)
    if result_cls is None or event_cls is None or not hasattr(result_cls, "events"):
        return "function_events", "kineto results not reachable; torch's function_events"
    missing = [f for f in KINETO_EVENT_FIELDS if not hasattr(event_cls, f)]
    if missing:
        return "function_events", f"kineto events lack {', '.join(missing)}; function_events"
    return "kineto", "prof.profiler.kineto_results.events() readable (~15x faster to attribute)"
