"""What one layer call costs under the `per-call` strategy, and the floor torch sets for it.

    .venv/bin/python benchmarks/bench_per_call.py [--leaves 100] [--rounds 7] [--calls 100]

`per-call` is torchprof's method: an autograd profiler session around every outermost selected
call. This prints, per layer call (microseconds, median over interleaved rounds, wall and this
thread's CPU time; 1 torch thread):

- `per-call` in the forward: (forward under the strategy - bare forward) / calls, on a model of
  `--leaves` leaves (blocks of Linear(16,16)+ReLU, batch 8), and its post-processing
  (`end_iteration`: reading each call's events) / calls;
- the floor: an empty `torch.autograd.profiler.profile()` entered and left, with per-call's
  options (none on CPU; `profile_memory=True` with --memory), and the wall time of its three C++
  steps (`_prepare_profiler`, `_enable_profiler`, `_disable_profiler`, as torch's own `_stats`
  record them); what hybridprof adds around them (fd 2 captured, SIGINT held); reading one Linear
  call's events (`function_events`);
- the alternatives: an empty session with other options (`profile_memory`, `record_shapes`,
  Kineto's experimental `trace_only` and `disable_external_correlation`) and through
  `torch.profiler.profile`; torch's legacy (pre-Kineto) profiler, empty and around a Linear; a
  `_RecordFunctionFast` range inside one running session (what the `session` strategy pays).
  (`_enable_profiler` again without a new `_prepare_profiler`, i.e. one prepared session reused,
  crashed torch 2.13, so it is not timed.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # before torch: no start/stop lines

import torch
import torch.autograd.profiler_legacy as legacy
from torch import nn

from hybridprof.planner.compat import probe
from hybridprof.runtime.basics.patching import ForwardPatcher
from hybridprof.runtime.basics.quiet import quiet_fd2
from hybridprof.runtime.basics.signals import sigint_deferred
from hybridprof.runtime.strategies import make_strategy
from hybridprof.runtime.strategies.base import StrategyConfig

WIDTH = 16


def make_model(leaves: int) -> nn.Module:
    blocks, left = [], leaves
    while left > 0:
        n = min(10, left)
        blocks.append(
            nn.Sequential(*[nn.Linear(WIDTH, WIDTH) if i % 2 else nn.ReLU() for i in range(n)])
        )
        left -= n
    return nn.Sequential(*blocks).eval()


def leaf_paths(model: nn.Module) -> tuple[str, ...]:
    return tuple(name for name, m in model.named_modules() if name and not list(m.children()))


def timed(work: Callable[[], Any], times: int = 1) -> tuple[float, float]:
    """(wall, CPU) microseconds per run of `work`, over `times` runs."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(times):
        work()
    return (
        (time.perf_counter() - wall) * 1e6 / times,
        (time.thread_time() - cpu) * 1e6 / times,
    )


class Floor:
    """Empty profiler sessions and their parts, one call at a time."""

    def __init__(self, memory: bool) -> None:
        self.memory = memory
        self.linear = nn.Linear(WIDTH, WIDTH)
        self.x = torch.randn(8, WIDTH)
        self.steps: list[tuple[int, int, int]] = []  # torch's own timing of each session's steps

    def new(self) -> Any:
        return torch.autograd.profiler.profile(profile_memory=self.memory)

    def bare_linear(self) -> None:
        self.linear(self.x)

    def empty_session(self) -> None:
        profiler = self.new()
        profiler.__enter__()
        profiler.__exit__(None, None, None)
        stats = profiler._stats
        self.steps.append(
            (
                stats.profiler_prepare_call_duration_us,
                stats.profiler_enable_call_duration_us,
                stats.profiler_disable_call_duration_us,
            )
        )

    def variants(self) -> dict[str, dict[str, Any]]:
        """Options that might make a session cheaper (none does, on torch 2.13)."""
        config = torch._C._profiler._ExperimentalConfig
        return {
            "profile_memory=True": {"profile_memory": True},
            "record_shapes=True": {"record_shapes": True},
            "trace_only": {"experimental_config": config(trace_only=True)},
            "no external correlation": {
                "experimental_config": config(disable_external_correlation=True)
            },
        }

    def variant(self, options: dict[str, Any]) -> None:
        profiler = torch.autograd.profiler.profile(**options)
        profiler.__enter__()
        profiler.__exit__(None, None, None)

    def new_api_session(self) -> None:
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        profiler.start()
        profiler.stop()

    def empty_session_wrapped(self) -> None:
        """As per-call does it: fd 2 captured and SIGINT held around the start and the stop."""
        profiler = self.new()
        with sigint_deferred(), quiet_fd2():
            profiler.__enter__()
        with sigint_deferred(), quiet_fd2():
            profiler.__exit__(None, None, None)

    def linear_session(self) -> Any:
        profiler = self.new()
        profiler.__enter__()
        self.linear(self.x)
        profiler.__exit__(None, None, None)
        return profiler

    def legacy_empty(self) -> None:
        profiler = legacy.profile(profile_memory=self.memory)
        profiler.__enter__()
        profiler.__exit__(None, None, None)

    def legacy_linear(self) -> None:
        profiler = legacy.profile(profile_memory=self.memory)
        profiler.__enter__()
        self.linear(self.x)
        profiler.__exit__(None, None, None)


def floor_rows(floor: Floor, calls: int) -> dict[str, tuple[float, float]]:
    floor.steps.clear()
    rows = {
        "bare Linear(16,16) forward": timed(floor.bare_linear, calls),
        "empty profile() enter+exit": timed(floor.empty_session, calls),
    }
    for i, step in enumerate(("_prepare_profiler", "_enable_profiler", "_disable_profiler")):
        wall = statistics.median(steps[i] for steps in floor.steps)
        rows[f"  of which {step} (wall only)"] = (wall, float("nan"))
    rows["  + fd 2 captured, SIGINT held (per-call's)"] = timed(floor.empty_session_wrapped, calls)
    for name, options in floor.variants().items():
        rows[f"empty session, {name}"] = timed(
            lambda options=options: floor.variant(options), calls
        )
    sessions = [floor.linear_session() for _ in range(calls)]
    rows["profile() around a Linear"] = timed(floor.linear_session, calls)
    it = iter(sessions)
    rows["  its function_events (torch's parse)"] = timed(lambda: next(it).function_events, calls)
    rows["empty torch.profiler.profile() start+stop"] = timed(floor.new_api_session, calls)
    rows["legacy profile() enter+exit"] = timed(floor.legacy_empty, calls)
    rows["legacy profile() around a Linear"] = timed(floor.legacy_linear, calls)
    rows["_RecordFunctionFast range in a session"] = fast_range(calls)
    return rows


def fast_range(calls: int) -> tuple[float, float]:
    make = torch._C._profiler._RecordFunctionFast
    with torch.autograd.profiler.profile():

        def one() -> None:
            with make("hp::layer"):
                pass

        return timed(one, calls)


def per_call_rows(leaves: int, memory: bool) -> dict[str, tuple[float, float]]:
    """One forward of the model bare and one under `per-call` (its calls, its post-processing)."""
    model = make_model(leaves)
    x = torch.randn(8, WIDTH)
    paths = leaf_paths(model)
    config = StrategyConfig(paths=paths, compat=probe(), profile_memory=memory)
    strategy = make_strategy("per-call", config)
    with quiet_fd2():
        strategy.begin()
    bare = timed(lambda: model(x))
    patcher = ForwardPatcher(model, paths, strategy.call)
    patcher.patch()
    try:
        strategy.begin_iteration()
        measured = timed(lambda: model(x))
        post = timed(strategy.end_iteration)
    finally:
        patcher.restore()
        strategy.end()
    n = len(paths)
    return {
        "per-call: in the forward": ((measured[0] - bare[0]) / n, (measured[1] - bare[1]) / n),
        "per-call: post-processing": (post[0] / n, post[1] / n),
        "per-call: both": (
            (measured[0] - bare[0] + post[0]) / n,
            (measured[1] - bare[1] + post[1]) / n,
        ),
        "bare forward, per leaf": (bare[0] / n, bare[1] / n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100, help="floor: calls timed per round")
    parser.add_argument("--memory", action="store_true", help="profile_memory=True")
    args = parser.parse_args()
    torch.set_num_threads(1)
    floor = Floor(args.memory)
    with torch.no_grad():
        floor_rows(floor, 10)  # warm: first starts, first parse
        per_call_rows(args.leaves, args.memory)
        rounds: list[dict[str, tuple[float, float]]] = []
        for _ in range(args.rounds):  # interleaved: every figure once per round
            rounds.append(
                {**per_call_rows(args.leaves, args.memory), **floor_rows(floor, args.calls)}
            )
    print(
        f"torch {torch.__version__}, 1 thread, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}; {args.leaves} leaves; profile_memory={args.memory}; "
        f"medians of {args.rounds} rounds"
    )
    print(f"{'us per call':48s} {'wall':>8s} {'CPU':>8s}")
    for name in rounds[0]:
        wall = statistics.median(r[name][0] for r in rounds)
        cpu = statistics.median(r[name][1] for r in rounds)
        print(f"{name:48s} {wall:8.1f} {cpu:8.1f}")


if __name__ == "__main__":
    main()
