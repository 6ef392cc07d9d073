"""The session strategy's cost to the profiled thread, calibrated on this machine and torch: per
recorded event and per layer call (`datamodel.Calibration`), which the layer table takes out of
each row (`analysis.compensation`).

Per event: `profiler_op_cost_us` (a loop of tiny adds, bare and under the profiler). Per layer
call: a real container of no-op modules (`nn.Identity`, which records no op) patched and run under
the session strategy itself, so the range and hybridprof's Python wrapper around it are both paid
as in a profiled model: the whole cost per call is (profiled - bare) / calls, and the part inside
the layer's range (what its own self time carries) is a no-op child's measured self time less the
bare cost of its forward; the rest lands in the caller's self time. Per module call, bare: a tiny
module (one `relu` of 4 elements) called through `nn.Module.__call__` against its `forward`
called directly; that dispatch runs in the caller before the layer's range opens, so the table
moves it into the layer (a layer called alone pays it too). Each figure is the best of a few
repeats (the least disturbed by other work); the whole takes about 60 ms.

Measured once per machine and torch version and cached in the user's cache folder
(`calibration.json`, keyed like the FLOPs peak: host, CPU, torch, threads); a cache that cannot be
read or written is ignored (measured each run). Delete the file to measure again.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime, timezone

import torch
from torch import nn

from hybridprof.datamodel import Calibration
from hybridprof.files.user_cache import read_entries, write_entry
from hybridprof.planner.compat import probe
from hybridprof.runtime.basics.patching import ForwardPatcher
from hybridprof.runtime.basics.quiet import quiet_fd2
from hybridprof.runtime.strategies.base import StrategyConfig
from hybridprof.runtime.strategies.op_cost import best_of, profiler_op_cost_us
from hybridprof.runtime.strategies.session_strategy import SessionStrategy

CACHE_FILE = "calibration.json"
RANGE_CALLS = 100  # no-op layers per calibration forward
RANGE_REPEATS = 5


def session_calibration() -> Calibration | None:
    """This machine's calibration: cached when an earlier run measured it, else measured now (and
    cached for the next runs); None when another profiler is running on this thread (one profiler
    session would stop the other: the rows then stay raw)."""
    key = _cache_key()
    cached = read_entries(CACHE_FILE).get(key)
    if isinstance(cached, dict):
        found = _from_cache(cached)
        if found is not None:
            return found
    if torch.autograd._profiler_enabled():
        return None
    measured = measure_calibration()
    _write_cache(key, measured)
    return measured


def measure_calibration() -> Calibration:
    """The costs measured now, on torch's current threads (see the module docstring)."""
    inner, outer = range_cost_us()
    return Calibration(
        event_us=round(profiler_op_cost_us(), 4),
        range_inner_us=round(inner, 4),
        range_outer_us=round(outer, 4),
        call_us=round(module_call_cost_us(), 4),
        source="measured",
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        load=_load(),
    )


class _Tiny(nn.Module):
    """A layer with one small op: its call costs what a real layer's dispatch does (an
    `nn.Identity`'s, with nothing to run, read 0.57 us against 0.92-0.97 us for ReLU and Linear)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def module_call_cost_us() -> float:
    """Microseconds `nn.Module.__call__` adds to a layer's `forward`, bare (0 or more)."""
    layers = [_Tiny() for _ in range(RANGE_CALLS)]
    forwards = [layer.forward for layer in layers]
    x = torch.rand(4)

    def called() -> None:
        for layer in layers:
            layer(x)

    def direct() -> None:
        for forward in forwards:
            forward(x)

    with torch.no_grad():
        called()
        direct()
        through_call = best_of(called, RANGE_REPEATS * 2)
        straight = best_of(direct, RANGE_REPEATS * 2)
    return max(0.0, (through_call - straight) / RANGE_CALLS * 1e6)


def range_cost_us() -> tuple[float, float]:
    """Per layer call of the session strategy: (the part inside the layer's range, the part
    around it), in us, each 0 or more."""
    model = nn.Sequential(*(nn.Identity() for _ in range(RANGE_CALLS)))
    paths = tuple(str(i) for i in range(RANGE_CALLS))
    x = torch.rand(4)
    own_forwards = [child.forward for child in model]

    def bare_forwards() -> None:
        for forward in own_forwards:
            forward(x)

    with torch.no_grad():
        model(x)
        bare = best_of(lambda: model(x))
        bare_forward = best_of(bare_forwards)
        strategy = SessionStrategy(StrategyConfig(paths=paths, compat=probe()))
        with quiet_fd2():
            strategy.begin()
        with ForwardPatcher(model, paths, strategy.call):
            model(x)  # the wrapper's first calls
            with quiet_fd2():
                strategy.begin_iteration()
            try:
                profiled = best_of(lambda: model(x), RANGE_REPEATS)
            finally:
                with quiet_fd2():
                    measure = strategy.end_iteration()
    per_call = (profiled - bare) / RANGE_CALLS * 1e6
    selves = sorted(
        m.self_cpu_us / m.calls for p, m in measure.paths.items() if p in paths and m.calls
    )
    if not selves:
        return 0.0, max(0.0, per_call)
    inner = max(0.0, selves[len(selves) // 2] - bare_forward / RANGE_CALLS * 1e6)
    inner = min(inner, max(0.0, per_call))
    return inner, max(0.0, per_call - inner)


def _cache_key() -> str:
    cpu = platform.processor() or platform.machine()
    return "|".join(
        (platform.node(), cpu, f"threads={torch.get_num_threads()}", f"torch {torch.__version__}")
    )


def _from_cache(entry: dict[str, object]) -> Calibration | None:
    """The cached entry as a calibration, None when it is not one (a damaged file)."""
    names = ("event_us", "range_inner_us", "range_outer_us", "call_us")
    costs = [entry.get(name) for name in names]
    when, load = entry.get("measured_at"), entry.get("load")
    numbers = [float(c) for c in costs if isinstance(c, int | float) and not isinstance(c, bool)]
    if len(numbers) != 4 or not all(0.0 <= n < 1e6 for n in numbers) or not isinstance(when, str):
        return None  # damaged, or written before a figure was measured: measure again
    event, inner, outer, call = numbers
    return Calibration(
        event,
        inner,
        outer,
        call_us=call,
        source="cached",
        measured_at=when,
        load=float(load) if isinstance(load, int | float) else None,
    )


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _write_cache(key: str, found: Calibration) -> None:
    write_entry(
        CACHE_FILE,
        key,
        {
            "event_us": found.event_us,
            "range_inner_us": found.range_inner_us,
            "range_outer_us": found.range_outer_us,
            "call_us": found.call_us,
            "measured_at": found.measured_at,
            "load": found.load,
        },
    )


__all__ = [
    "CACHE_FILE",
    "measure_calibration",
    "module_call_cost_us",
    "range_cost_us",
    "session_calibration",
]
