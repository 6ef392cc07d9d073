"""Reading a finished profiler session's raw events cheaply.

torch's own `function_events` builds a FunctionEvent (plus its tree and memory intervals) for every
event: seconds for a few forwards of a 400-leaf MLP (benchmarks/README.md, "Measured in passing").
Attribution needs only a
handful of fields, so when `Compat.raw_events == "kineto"` we read them straight from
`prof.kineto_results.events()` (semi-private; `compat.probe()` checks it exists) and fall back to
`function_events` otherwise. Both paths give the same `Event` tuples.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hybridprof.runtime.events.tp_names import SIZED, first_input_bytes

MEMORY_EVENT = "[memory]"
# A range the session strategy opens where an iteration's measure starts (see `start_measuring`):
# every event that starts before it belongs to the unmeasured warm step and is dropped.
MEASURE_MARK = "hybridprof::measure"

# Utility events torch itself leaves out of its tables (profiler_util._filter_name).
SKIPPED_NAMES = frozenset(
    {
        "[OutOfMemory]",
        "Activity Buffer Request",  # Kineto's own CUPTI buffer allocation, not the model's work
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
        MEASURE_MARK,
    }
)


class Event(NamedTuple):
    """One raw profiler event, only the fields attribution reads.

    A NamedTuple rather than a dataclass: thousands are built per iteration and tuple construction
    is several times cheaper than a frozen dataclass's `object.__setattr__` per field.
    kind: "cpu" (an op or a range on a CPU thread), "device" (a kernel/memcpy on an accelerator),
    "mem" (an allocation/free instant; nbytes signed, on_device when it was device memory).
    """

    kind: str
    name: str
    start_ns: int
    end_ns: int
    thread: int
    seq: int = -1  # autograd sequence number (links a backward node to its forward op)
    fwd_thread: int = 0  # thread of the forward op that created this backward node
    correlation_id: int = 0  # CPU op id that device events link to
    linked_id: int = 0  # for device events: the launching CPU op's correlation_id
    nbytes: int = 0
    on_device: bool = False


def read_events(prof: Any, method: str, *, links: bool, device: bool) -> list[Event]:
    """The events of a stopped `torch.autograd.profiler.profile`.

    method: the `Compat.raw_events` choice ("kineto" or "function_events").
    links: read autograd sequence numbers (needed for backward attribution).
    device: read correlation ids (needed to link kernels to their launching op).
    """
    if method == "kineto":
        return _from_kineto(prof.kineto_results.events(), links=links, device=device)
    return _from_function_events(prof.function_events)


def _after_mark(events: list[Event], mark_ns: int | None) -> list[Event]:
    """The events from the measure mark on (all of them when there is no mark)."""
    if mark_ns is None:
        return events
    return [e for e in events if e[2] >= mark_ns]  # e[2]: start_ns


def _from_kineto(raw: Any, *, links: bool, device: bool) -> list[Event]:
    """Only the accessors needed are called (each is a pybind call), and Events are built
    with tuple.__new__ (skipping NamedTuple's Python-level __new__): this loop runs per event."""
    from torch.autograd import DeviceType

    cpu = DeviceType.CPU
    new = tuple.__new__
    out: list[Event] = []
    append = out.append
    mark_ns: int | None = None
    for e in raw:
        name = e.name()
        if name in SKIPPED_NAMES:
            if name == MEASURE_MARK:
                mark_ns = e.start_ns()
            continue
        start = e.start_ns()
        if name == MEMORY_EVENT:
            nbytes, on_dev = e.nbytes(), e.device_type() != cpu
            append(
                new(
                    Event,
                    ("mem", name, start, start, e.start_thread_id(), -1, 0, 0, 0, nbytes, on_dev),
                )
            )
        elif not (links or device):  # the common case: CPU only, forward only
            append(
                new(
                    Event,
                    ("cpu", name, start, e.end_ns(), e.start_thread_id(), -1, 0, 0, 0, 0, False),
                )
            )
        else:
            is_cpu = e.device_type() == cpu
            if is_cpu and e.linked_correlation_id() > 0:
                # A CUDA runtime call (cudaLaunchKernel, cudaMemcpyAsync): its CPU time lies inside
                # the op that made it, and Kineto may file it under another thread id.
                continue
            append(_linked_event(e, name, start, links, is_cpu))
    return _after_mark(out, mark_ns)


def _linked_event(e: Any, name: str, start: int, links: bool, is_cpu: bool) -> Event:
    seq, fwd = (e.sequence_nr(), e.fwd_thread_id()) if links else (-1, 0)
    corr, linked = e.correlation_id(), e.linked_correlation_id()
    kind = "cpu" if is_cpu else "device"
    # a collective's bytes (tensor parallel), when its shapes were recorded
    nbytes = first_input_bytes(e.shapes(), e.dtypes()) if name in SIZED else 0
    return Event(kind, name, start, e.end_ns(), e.start_thread_id(), seq, fwd, corr, linked, nbytes)


def _from_function_events(function_events: Any) -> list[Event]:
    """The slow, public path: FunctionEvents already fold memory into their intervals, so each
    event's self memory is re-emitted as one instant at its start (attribution then nests it)."""
    out: list[Event] = []
    mark_ns: int | None = None
    for fe in function_events:
        start = int(fe.time_range.start * 1000)
        end = int(fe.time_range.end * 1000)
        if fe.name == MEASURE_MARK:
            mark_ns = start
            continue
        out.append(
            Event("cpu", fe.name, start, end, fe.thread, fe.sequence_nr, fe.fwd_thread, fe.id)
        )
        if fe.self_cpu_memory_usage:
            out.append(
                Event("mem", MEMORY_EVENT, start, start, fe.thread, nbytes=fe.self_cpu_memory_usage)
            )
        device_mem = getattr(fe, "self_device_memory_usage", 0)
        if device_mem:
            out.append(
                Event(
                    "mem", MEMORY_EVENT, start, start, fe.thread, nbytes=device_mem, on_device=True
                )
            )
        for kernel in fe.kernels:
            dur = int(kernel.duration * 1000)
            out.append(Event("device", kernel.name, start, start + dur, -1, linked_id=fe.id))
    return _after_mark(out, mark_ns)


# A Chrome trace of every measured iteration made each many times slower to export and the file
# grow without bound (benchmarks/README.md, "Measured in passing"); the first few show the same
# thing.
TRACE_ITERATIONS = 5


class TraceParts:
    """One Chrome/Perfetto trace file built from the first `TRACE_ITERATIONS` measured iterations.

    Each stopped session is saved to its own temporary file at once (so no events stay in memory
    between iterations); `write()` streams their `traceEvents` into the one file the user asked
    for, one part in memory at a time. Later iterations are not exported at all.
    """

    def __init__(self, path: str) -> None:
        import tempfile

        self.path = path
        self._folder = tempfile.TemporaryDirectory(prefix="hybridprof-trace-")
        self._parts: list[str] = []

    def add(self, prof: Any) -> None:
        if len(self._parts) >= TRACE_ITERATIONS:
            return
        part = f"{self._folder.name}/part{len(self._parts)}.json"
        prof.export_chrome_trace(part)
        self._parts.append(part)

    def write(self) -> None:
        import json

        from hybridprof.files.outputs import atomic_file

        extra: dict[str, Any] = {}
        with atomic_file(self.path, force=True) as out:  # the caller checked the path up front
            out.write(b'{"traceEvents": [')
            wrote = False
            for part in self._parts:
                with open(part, encoding="utf-8") as handle:
                    data = json.load(handle)
                events = json.dumps(data.pop("traceEvents", []))[1:-1]
                if events:
                    out.write((b"," if wrote else b"") + events.encode("utf-8"))
                    wrote = True
                extra.update({k: v for k, v in data.items() if k not in extra})
            out.write(b"]")
            for key, value in extra.items():
                out.write(f", {json.dumps(key)}: {json.dumps(value)}".encode())
            out.write(b"}\n")
        self._folder.cleanup()
