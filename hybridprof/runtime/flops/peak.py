"""The machine's peak FLOP/s and bytes/s, measured once per machine by a short microbenchmark.

A large matmul gives FLOP/s; the better of a large copy (read plus write) and a large sum (read)
gives bytes/s; on the run's device, thread count and the model's floating dtype, so a layer's
achieved figures compare with what this machine can do in the same conditions. Each is the best of
repeats within 0.4 s after one warm-up call (benchmarks/README.md, bench_flops, times the whole
measurement). The result is cached per machine
in the user's cache folder ($XDG_CACHE_HOME/hybridprof or ~/.cache/hybridprof, `peak.json`), keyed
by host, CPU, device, dtype, threads and torch version; a machine busy with other work measures low
and the low figure is cached: delete the file to measure again. Figures the user gives
(`--peak-gflops`, `--peak-gbps`) replace the measured ones. A cache that cannot be read or written
is ignored: the peak is then measured each run.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import torch

from hybridprof.datamodel import MachinePeak
from hybridprof.files.user_cache import cache_dir, read_entries, write_entry

BUDGET_S = 0.4  # per benchmark (matmul, copy, sum), after one warm-up call
CACHE_FILE = "peak.json"


@dataclass(frozen=True, slots=True)
class PeakRequest:
    device: torch.device
    dtype: torch.dtype
    threads: int
    gflops: float | None = None  # given by the user: not measured
    gbps: float | None = None


def machine_peak(request: PeakRequest) -> MachinePeak:
    """The peak for `request`: given figures as given, else cached, else measured (and cached)."""
    how = _how(request)
    if request.gflops is not None and request.gbps is not None:
        return MachinePeak(
            request.gflops, request.gbps, "given", "given with --peak-gflops/--peak-gbps"
        )
    key = _cache_key(request)
    cached = read_entries(CACHE_FILE).get(key)
    where = cache_dir() / CACHE_FILE
    if isinstance(cached, dict) and _valid(cached):
        load = cached.get("load")
        at_load = f" at load {load:.2f}" if isinstance(load, int | float) else ""
        source = (
            f"cached (measured {cached['measured_at']}{at_load}, read from {where}; delete it "
            "to measure again)"
        )
        gflops, gbps = float(cached["gflops"]), float(cached["gbps"])
    else:
        gflops, gbps = round(measure_gflops(request), 3), round(measure_gbps(request), 3)
        source = f"measured (at load {_load():.2f}; cached in {where} for the next runs)"
        _write_cache(key, gflops, gbps)
    if request.gflops is not None or request.gbps is not None:
        source += "; given: " + ("GFLOP/s" if request.gflops is not None else "GB/s")
    return MachinePeak(
        request.gflops if request.gflops is not None else gflops,
        request.gbps if request.gbps is not None else gbps,
        source,
        how,
    )


def measure_gflops(request: PeakRequest) -> float:
    n = 4096 if request.device.type == "cuda" else 1024
    a = torch.randn(n, n, device=request.device).to(request.dtype)
    b = torch.randn(n, n, device=request.device).to(request.dtype)
    seconds = _best_time(lambda: torch.mm(a, b), request.device)
    return 2 * n**3 / seconds / 1e9


def measure_gbps(request: PeakRequest) -> float:
    """The better of a large copy (bytes read + written) and a large sum (bytes read).

    A copy alone understates what a layer that mostly reads can reach: on one CPU core a
    matrix-vector product streams its weights about twice as fast as a copy moves data (the copy
    also reads each destination line before writing it, traffic it is not credited for).
    """
    nbytes = (256 if request.device.type == "cuda" else 64) * 2**20
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=request.device).fill_(1.0)
    dst = torch.empty_like(src)
    copy = 2 * nbytes / _best_time(lambda: dst.copy_(src), request.device)
    read = nbytes / _best_time(lambda: torch.sum(src), request.device)
    return max(copy, read) / 1e9


def _best_time(work: Callable[[], object], device: torch.device) -> float:
    """The fastest of repeated calls within BUDGET_S (at least 3), after one warm-up call."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    work()
    sync()
    best = float("inf")
    deadline = time.perf_counter() + BUDGET_S
    done = 0
    while done < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        work()
        sync()
        best = min(best, time.perf_counter() - start)
        done += 1
    return best


def _how(request: PeakRequest) -> str:
    n = 4096 if request.device.type == "cuda" else 1024
    mib = 256 if request.device.type == "cuda" else 64
    dtype = str(request.dtype).removeprefix("torch.")
    threads = f"{request.threads} thread{'s' if request.threads != 1 else ''}"
    return (
        f"{n}x{n} {dtype} matmul, {mib} MiB copy and sum on {_device_name(request.device)}, "
        f"{threads}"
    )


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return "cpu"


def _cache_key(request: PeakRequest) -> str:
    cpu = platform.processor() or platform.machine()
    return "|".join(
        (
            platform.node(),
            cpu,
            _device_name(request.device),
            str(request.dtype),
            f"threads={request.threads}",
            f"torch {torch.__version__}",
        )
    )


def _valid(entry: dict[str, object]) -> bool:
    numbers = [entry.get("gflops"), entry.get("gbps")]
    return all(isinstance(v, int | float) and v > 0 for v in numbers) and isinstance(
        entry.get("measured_at"), str
    )


def _load() -> float:
    """The 1-minute load average (0 where the system has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _write_cache(key: str, gflops: float, gbps: float) -> None:
    write_entry(
        CACHE_FILE,
        key,
        {
            "gflops": gflops,
            "gbps": gbps,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load": round(_load(), 2),  # a busy machine measures a low peak: said when it is read
        },
    )


def model_dtype(parameters: Sequence[torch.Tensor]) -> torch.dtype:
    """The floating dtype most of the model's parameters have (float32 without any)."""
    counts: dict[torch.dtype, int] = {}
    for p in parameters:
        if p.is_floating_point():
            counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
    return max(counts, key=lambda d: counts[d]) if counts else torch.float32


__all__ = [
    "PeakRequest",
    "cache_dir",
    "machine_peak",
    "measure_gbps",
    "measure_gflops",
    "model_dtype",
]
