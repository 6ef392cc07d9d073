"""Decide torch compatibility once, from the installed torch, and say why.

`probe()` inspects the installed torch a single time (signatures and attributes, never by calling
user code and catching TypeError) and returns a `Compat`; `Compat.choices()` gives the same decisions
as `CompatChoice`s with reasons for the plan and the report.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        "record_function" (public, ~12 us per range while profiling).
    raw_events: "kineto" (walk prof.profiler.kineto_results.events() directly) or
        "function_events" (torch's own, ~100 us per event post-processing).
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
