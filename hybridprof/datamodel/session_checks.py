"""Values of the right type that no run produces, found when a session is loaded.

The JSON reader checks types and bounds; a hand-edited or corrupted file can still hold a
negative peak, compile time or count, a schedule that measures no step, or a memory timeline
whose series differ in length. Each would render as nonsense ("step peak -931.32 GB") or fail
deep inside a report, so the loader refuses it in one line naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from hybridprof.datamodel.compiled import CompileSection
from hybridprof.datamodel.measures import OpStat, Stat
from hybridprof.datamodel.memory import DeviceMemory, MemoryProfile, MemoryTimeline
from hybridprof.datamodel.ranks import UnitComm
from hybridprof.datamodel.training import ScheduleInfo


class ProfileSession(Protocol):
    """The session's fields checked here (a protocol: session.py calls this module as it loads)."""

    @property
    def warmup(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def schedule(self) -> ScheduleInfo | None: ...
    @property
    def memory(self) -> MemoryProfile | None: ...
    @property
    def compiled(self) -> CompileSection | None: ...
    @property
    def fsdp(self) -> tuple[UnitComm, ...]: ...
    @property
    def tp(self) -> tuple[UnitComm, ...]: ...
    @property
    def outside_ops(self) -> tuple[OpStat, ...]: ...


Figure = tuple[str, float | Stat | None]  # (where in the file, a value that is never negative)


def impossible_value(session: ProfileSession) -> str | None:
    """The first impossible value in `session`, said as "where is what (why)"; None: none."""
    for where, value in _never_negative(session):
        low = value.min if isinstance(value, Stat) else value
        if low is not None and low < 0:
            shown = f"{low:g}" if not isinstance(value, Stat) else f"{list(value.json_encode())}"
            return f"{where} is {shown} (never negative)"
    schedule = session.schedule
    if schedule is not None and schedule.active < 1:
        return f"schedule.active is {schedule.active} (a schedule measures at least one step)"
    return _timeline_problem(session.memory)


def _never_negative(session: ProfileSession) -> Iterator[Figure]:
    yield from (
        ("warmup", session.warmup),
        ("iterations", session.iterations),
        ("steps", session.steps),
        ("duration_s", session.duration_s),
    )
    if session.schedule is not None:
        yield from _schedule_counts(session.schedule)
    if session.compiled is not None:
        yield from _compile_figures(session.compiled)
    if session.memory is not None:
        for index, device in enumerate(session.memory.devices):
            yield from _device_figures(f"memory.devices[{index}]", device)
    for index, unit in enumerate(session.fsdp):
        yield from ((f"fsdp[{index}].{name}", getattr(unit, name)) for name in _UNIT_FIGURES)
        yield from ((f"fsdp[{index}].wait_us[{r}]", us) for r, us in enumerate(unit.wait_us))
    for index, unit in enumerate(session.tp):
        yield from ((f"tp[{index}].{name}", getattr(unit, name)) for name in _UNIT_FIGURES)
    for index, op in enumerate(session.outside_ops):
        yield from ((f"outside_ops[{index}].{name}", getattr(op, name)) for name in _OP_FIGURES)


_UNIT_FIGURES = ("calls", "time_us", "nbytes", "exposed_us", "waited_for")
# An op's counts and times (its memory figures are net: a free makes them negative).
_OP_FIGURES = ("calls", "self_cpu_us", "total_cpu_us", "self_device_us", "total_device_us")


def _schedule_counts(schedule: ScheduleInfo) -> Iterator[Figure]:
    for name in ("wait", "warmup", "active", "repeat", "skip_first", "skip_first_wait"):
        yield f"schedule.{name}", getattr(schedule, name)


_COMPILE_FIGURES = (
    "compile_s",
    "backward_compile_s",
    "frames",
    "graphs",
    "call_sites",
    "matched_events",
    "unmatched_events",
    "eager_islands",
    "cache_hits",
    "cache_rebuilt",
)


def _compile_figures(section: CompileSection) -> Iterator[Figure]:
    for name in _COMPILE_FIGURES:
        yield f"compiled.{name}", getattr(section, name)


_DEVICE_FIGURES = (
    "start_bytes",
    "peak_live_bytes",
    "peak_above_start_bytes",
    "allocated_bytes",
    "freed_bytes",
    "saved_bytes",
    "saved_param_bytes",
    "peak_reserved_bytes",
)


def _device_figures(where: str, device: DeviceMemory) -> Iterator[Figure]:
    for name in _DEVICE_FIGURES:
        yield f"{where}.{name}", getattr(device, name)
    peak = device.peak
    yield f"{where}.peak.live_bytes", peak.live_bytes
    yield f"{where}.peak.above_start_bytes", peak.above_start_bytes
    yield f"{where}.peak.reserved_bytes", peak.reserved_bytes
    if device.timeline is not None:
        yield f"{where}.timeline.events", device.timeline.events
        yield f"{where}.timeline.end_us", device.timeline.end_us


def _timeline_problem(memory: MemoryProfile | None) -> str | None:
    """A timeline's series are one curve: as many times as live (and reserved) values, and at
    least one (the step's start)."""
    for index, device in enumerate(memory.devices if memory is not None else ()):
        if device.timeline is not None and not _one_curve(device.timeline):
            timeline = device.timeline
            reserved = timeline.reserved_bytes
            sizes = f"{len(timeline.time_us.values)} times, {len(timeline.live_bytes)} live values"
            sizes += f", {len(reserved)} reserved values" if reserved is not None else ""
            return f"memory.devices[{index}].timeline holds {sizes} (one point each, at least one)"
    return None


def _one_curve(timeline: MemoryTimeline) -> bool:
    lengths = {len(timeline.time_us.values), len(timeline.live_bytes)}
    if timeline.reserved_bytes is not None:
        lengths.add(len(timeline.reserved_bytes))
    return len(lengths) == 1 and 0 not in lengths


__all__ = ["impossible_value"]
