"""Hand-made sessions with a memory section (no torch), for the reporter and schema tests."""

from __future__ import annotations

from dataclasses import replace

from hybridprof.datamodel import (
    DeviceMemory,
    LayerMemory,
    MemoryBytes,
    MemoryProfile,
    MemoryTimeline,
    PeakShare,
    ProfileSession,
    Series,
    Stat,
    StepPeak,
    TimelineLane,
)
from hybridprof.datamodel.memory import MEMORY_VERSION, ByteSeries
from tests.sessions import HOSTILE, hostile_session, small_session

MiB = 2**20


def device(paths: tuple[str, ...], peak_path: str) -> DeviceMemory:
    layers = tuple(
        LayerMemory(
            path,
            peak=(i + 1) * MiB,
            peak_live=(i + 5) * MiB,
            self_alloc=(i + 1) * MiB,
            alloc=(i + 1) * MiB,
            self_freed=(i + 2) * MiB,  # frees more than it allocates: a negative net
            freed=(i + 2) * MiB,
            saved=(i + 1) * 256 * 1024,
            saved_unique=(i + 1) * 256 * 1024,
            backward_peak=(i + 1) * 2 * MiB,
        )
        for i, path in enumerate(paths)
    )
    parts = MemoryBytes(parameters=2 * MiB, activations=3 * MiB, temporaries=MiB)
    peak = StepPeak(
        live_bytes=6 * MiB,
        above_start_bytes=4 * MiB,
        time_us=700.0,
        phase="backward",
        path=peak_path,
        node="AddmmBackward0",
        categories=parts,
        by_layer=(
            PeakShare("forward", peak_path, MemoryBytes(activations=3 * MiB)),
            PeakShare("start", None, MemoryBytes(parameters=2 * MiB)),
            PeakShare("backward", None, MemoryBytes(temporaries=MiB)),
        ),
    )
    timeline = MemoryTimeline(
        time_us=Series.of([0.0, 100.0, 400.0, 700.0, 900.0]),
        live_bytes=ByteSeries([2 * MiB, 3 * MiB, 5 * MiB, 6 * MiB, 2 * MiB]),
        end_us=1000.0,
        events=40,
        lanes=(
            *(TimelineLane(p, "forward", 0, 50.0 * i, 50.0 * i + 40) for i, p in enumerate(paths)),
            TimelineLane(peak_path, "backward", 0, 600.0, 800.0),
        ),
    )
    return DeviceMemory(
        device="cpu",
        start_bytes=2 * MiB,
        start_exact=False,
        peak=peak,
        peak_live_bytes=Stat(6.0 * MiB, 6.0 * MiB, 6.0 * MiB),
        peak_above_start_bytes=Stat(4.0 * MiB, 4.0 * MiB, 4.0 * MiB),
        allocated_bytes=10 * MiB,
        freed_bytes=10 * MiB,
        saved_bytes=3 * MiB,
        start=MemoryBytes(parameters=2 * MiB),
        layers=layers,
        outside=LayerMemory("", self_alloc=1024, alloc=1024),
        timeline=timeline,
        notes=("a note on the cpu",),
    )


def with_memory(session: ProfileSession, peak_path: str) -> ProfileSession:
    paths = tuple(r.path for r in session.records)
    memory = MemoryProfile(
        devices=(device(paths, peak_path),), method="a test's own numbers", version=MEMORY_VERSION
    )
    return replace(
        session,
        profile_memory=True,
        backward=True,
        memory=memory,
        outside_cpu_us=Stat(80.0, 70.0, 90.0),
    )


def layer_memory_session() -> ProfileSession:
    """The small session (fc1, act, fc2) with per-layer memory; fc2 makes the peak."""
    return with_memory(small_session(), "fc2")


def hostile_memory_session() -> ProfileSession:
    """A layer named like an HTML injection makes the peak."""
    return with_memory(hostile_session(), HOSTILE)
