"""Overhead of the ways to profile a model layer by layer, measured side by side in one run.

    .venv/bin/python benchmarks/bench_overhead.py            # full run (a few minutes)
    .venv/bin/python benchmarks/bench_overhead.py --quick    # short run: fewer rounds, same table

Models: the bundled AlexNet-like (1x3x224x224) and a 400-leaf MLP (200 x Linear(256,256)+ReLU,
input 32x256). For each, at 1 thread and at torch's default thread count, every configuration's
forward is timed right after a bare forward, round after round (interleaved, after warm-up), and
the median of the per-round ratios is printed: this machine is shared and noisy, and a ratio of two
neighbouring measurements cancels most of the drift. Post-processing is the median time to turn one
iteration's events into numbers (stopping the profiler included). Peak RSS is measured per
configuration in a fresh subprocess. Also printed: the whole cost of `with Profile(...)` around
3 warm-up + 20 forwards plus the first `str(prof)` against the same 23 bare forwards; peak RSS of
`hybridprof.profile` at 200 vs 20 iterations; the agreement of `session` and `per-call` on AlexNet.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from hybridprof.examples import alexnet
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.basics.patching import ForwardPatcher
from hybridprof.runtime.basics.quiet import quiet_fd2
from hybridprof.runtime.strategies import make_strategy
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig

CONFIGS = ("torch.profiler", "torchprof", "session", "per-call", "timer")
STRATEGY_CONFIGS = ("session", "per-call", "timer")


def build(model_name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if model_name == "alexnet":
        return alexnet().eval(), torch.rand(1, 3, 224, 224)
    layers: list[nn.Module] = []
    for _ in range(200):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers).eval(), torch.randn(32, 256)


def leaf_paths(model: nn.Module) -> tuple[str, ...]:
    return tree_plan(model, None, (), None).selected_paths()


# ------------------------------------------------------------------------ torchprof, faithfully


class TorchprofStyle:
    """torchprof 1.x's method: a fresh autograd profiler around every leaf call, whose
    `function_events` are built inside the wrapped forward; display sums each trace's events."""

    def __init__(self, model: nn.Module, paths: tuple[str, ...]) -> None:
        self.model, self.paths = model, paths
        self.traces: dict[str, list[Any]] = {p: [] for p in paths}

    def __enter__(self) -> TorchprofStyle:
        for path in self.paths:
            module = self.model.get_submodule(path)
            module.forward = self._wrap(path, module.forward)
        return self

    def __exit__(self, *exc: object) -> None:
        for path in self.paths:
            del self.model.get_submodule(path).forward

    def _wrap(self, path: str, forward: Callable[..., Any]) -> Callable[..., Any]:
        def wrap_forward(*args: Any, **kwargs: Any) -> Any:
            with torch.autograd.profiler.profile() as prof:
                result = forward(*args, **kwargs)
            self.traces[path].append(prof.function_events)
            return result

        return wrap_forward

    def summarise(self) -> dict[str, tuple[float, float]]:
        """torchprof's per-layer self/total CPU: the sums over every event of every call."""
        out = {}
        for path, lists in self.traces.items():
            events = [e for event_list in lists for e in event_list]
            out[path] = (
                sum(e.self_cpu_time_total for e in events),
                sum(e.cpu_time_total for e in events),
            )
        for lists in self.traces.values():
            lists.clear()
        return out


# --------------------------------------------------------------- one timed forward per config


@dataclass
class Runner:
    """Times one forward of `model` under one configuration; `post` holds post-processing times."""

    name: str
    model: nn.Module
    x: torch.Tensor
    paths: tuple[str, ...]
    strategy: Strategy | None = None
    post: list[float] | None = None

    def __post_init__(self) -> None:
        self.post = []
        if self.name in STRATEGY_CONFIGS:
            config = StrategyConfig(paths=self.paths, compat=probe())
            self.strategy = make_strategy(self.name, config)
            with quiet_fd2():
                self.strategy.begin()

    def forward(self) -> float:
        if self.name == "bare":
            return timed(lambda: self.model(self.x))
        if self.name == "torch.profiler":
            return self._under_torch_profiler()
        if self.name == "torchprof":
            return self._torchprof()
        return self._strategy()

    def _under_torch_profiler(self) -> float:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        with quiet_fd2():
            prof.start()
        seconds = timed(lambda: self.model(self.x))
        self._post(lambda: _quietly(prof.stop))
        return seconds

    def _torchprof(self) -> float:
        tp = TorchprofStyle(self.model, self.paths)
        with tp, quiet_fd2():
            seconds = timed(lambda: self.model(self.x))
        self._post(tp.summarise)
        return seconds

    def _strategy(self) -> float:
        strategy = self.strategy
        assert strategy is not None
        patcher = ForwardPatcher(self.model, self.paths, strategy.call)
        patcher.patch()
        try:
            _quietly(strategy.begin_iteration)
            seconds = timed(lambda: self.model(self.x))
            self._post(lambda: _quietly(strategy.end_iteration))
        finally:
            patcher.restore()
        return seconds

    def _post(self, work: Callable[[], Any]) -> None:
        assert self.post is not None
        self.post.append(timed(work))

    def close(self) -> None:
        if self.strategy is not None:
            _quietly(self.strategy.end)


def _quietly(work: Callable[[], Any]) -> Any:
    with quiet_fd2():
        return work()


def timed(work: Callable[[], Any]) -> float:
    with torch.no_grad():
        start = time.perf_counter()
        work()
        return time.perf_counter() - start


def ratios(
    model_name: str, configs: tuple[str, ...], rounds: int, warmup: int
) -> dict[str, tuple[float, float, float]]:
    """Per config: (median ratio to bare, median forward ms, median post-processing ms)."""
    model, x = build(model_name)
    paths = leaf_paths(model)
    runners = {name: Runner(name, model, x, paths) for name in ("bare", *configs)}
    per_round: dict[str, list[float]] = {name: [] for name in configs}
    times: dict[str, list[float]] = {name: [] for name in configs}
    try:
        for round_no in range(warmup + rounds):
            for name in configs:
                bare, measured = runners["bare"].forward(), runners[name].forward()
                if round_no >= warmup:
                    per_round[name].append(measured / bare)
                    times[name].append(measured)
    finally:
        for runner in runners.values():
            runner.close()
    return {
        name: (
            statistics.median(per_round[name]),
            1e3 * statistics.median(times[name]),
            1e3 * statistics.median(runners[name].post[warmup:] or [0.0]),  # type: ignore[index]
        )
        for name in configs
    }


# ------------------------------------------------------------- whole cost, RSS, agreement


@dataclass(frozen=True, slots=True)
class WholeCost:
    """Medians over repeats, each next to its own 23 bare forwards."""

    ratio: float  # (with-block + first str(prof)) / bare: the "whole cost"
    bare_s: float
    block_s: float  # the with-block: profiled forwards and stopping the profiler
    str_s: float  # the first str(prof): layer ranges read, table rendered
    ops_s: float  # afterwards, the first session(): every op attributed (not in the ratio)
    free_s: float  # dropping the Profile and what it holds (not in the ratio)
    ratio_all: float  # everything above over bare


def whole_cost(repeats: int) -> WholeCost:
    """`with Profile(...)` around 3 + 20 forwards plus the first str(prof), against 23 bare
    forwards; what later reads and freeing cost is printed beside it, not hidden."""
    import hybridprof

    model, x = build("mlp")
    runs = []
    for _ in range(repeats):
        gc.collect()
        bare = timed(lambda: [model(x) for _ in range(23)])
        gc.collect()
        marks = [time.perf_counter()]
        with torch.no_grad(), quiet_fd2(), hybridprof.Profile(model) as prof:
            for _ in range(23):
                model(x)
        marks.append(time.perf_counter())
        str(prof)
        marks.append(time.perf_counter())
        prof.session()
        marks.append(time.perf_counter())
        del prof
        gc.collect()  # the Profile sits in reference cycles (patcher <-> strategy)
        marks.append(time.perf_counter())
        steps = [b - a for a, b in itertools.pairwise(marks)]
        runs.append((bare, *steps))
    bare_s, block_s, str_s, ops_s, free_s = (
        statistics.median(col) for col in zip(*runs, strict=True)
    )
    ratio = statistics.median((r[1] + r[2]) / r[0] for r in runs)
    ratio_all = statistics.median(sum(r[1:]) / r[0] for r in runs)
    return WholeCost(ratio, bare_s, block_s, str_s, ops_s, free_s, ratio_all)


def whole_cost_lines(cost: WholeCost) -> list[str]:
    return [
        f"\nwhole cost, MLP, 1 thread: `with Profile(...)` 3+20 forwards + first str(prof) = "
        f"{cost.ratio:.2f}x the 23 bare forwards (target <= 2.5)",
        f"- medians: bare {cost.bare_s:.3f} s; with-block {cost.block_s:.3f} s; first str(prof) "
        f"{cost.str_s:.3f} s; then the first session() (ops) {cost.ops_s:.3f} s; freeing the "
        f"Profile {cost.free_s:.3f} s; all of it {cost.ratio_all:.2f}x bare",
    ]


def rss_child(model_name: str, config: str, iters: int) -> None:
    """In a subprocess: run `iters` forwards under `config`, print the peak RSS in MB."""
    torch.set_num_threads(1)
    if config == "hybridprof.profile":
        from hybridprof.api import profile

        model, x = build(model_name)
        with quiet_fd2():
            profile(model, x, warmup=3, iters=iters)
    else:
        model, x = build(model_name)
        runner = Runner(config, model, x, leaf_paths(model))
        for _ in range(iters):
            runner.forward()
        runner.close()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def peak_rss(model_name: str, config: str, iters: int) -> float:
    cmd = [sys.executable, __file__, "--rss-child", model_name, config, str(iters)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def agreement(iters: int) -> list[str]:
    """session vs per-call on AlexNet: top-5 layers by self CPU, each layer's share of the total
    (from the per-layer medians over iterations), and how much a top layer varies per iteration."""
    from hybridprof.api import profile

    shares: dict[str, dict[str, float]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for strategy in ("session", "per-call"):
        model, x = build("alexnet")
        with quiet_fd2():
            session = profile(model, x, warmup=5, iters=iters, strategy=strategy)
        stats[strategy] = {r.path: r.self_cpu_us for r in session.records}
        total = sum(st.median for st in stats[strategy].values())
        shares[strategy] = {p: 100 * st.median / total for p, st in stats[strategy].items()}
    top = {s: sorted(v, key=v.__getitem__, reverse=True)[:5] for s, v in shares.items()}
    spread = {
        s: max(100 * (stats[s][p].max - stats[s][p].min) / stats[s][p].median for p in top[s])
        for s in stats
    }
    diff = max(abs(shares["session"][p] - shares["per-call"][p]) for p in shares["session"])
    return [
        f"- top-5 by self CPU, session:  {top['session']}",
        f"- top-5 by self CPU, per-call: {top['per-call']}",
        f"- same top-5 set: {set(top['session']) == set(top['per-call'])}; "
        f"max share difference: {diff:.2f} pp (target <= 5)",
        f"- worst per-iteration spread of a top-5 layer's self CPU, (max-min)/median: "
        f"session {spread['session']:.0f}%, per-call {spread['per-call']:.0f}%",
    ]


# ----------------------------------------------------------------------------- the report


def table(
    model_name: str,
    threads: int,
    result: dict[str, tuple[float, float, float]],
    rss: dict[str, float],
) -> list[str]:
    bare = f", bare forward peak RSS {rss['bare']:.0f} MB" if "bare" in rss else ""
    lines = [
        f"\n### {model_name}, {threads} thread(s){bare}\n",
        "| configuration | ratio to bare (median of rounds) | forward ms | post-processing ms "
        "| peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for name, (ratio, fwd_ms, post_ms) in result.items():
        label = f"hybridprof {name}" if name in STRATEGY_CONFIGS else name
        rss_text = f"{rss[name]:.0f}" if name in rss else "-"
        lines.append(f"| {label} | {ratio:.2f}x | {fwd_ms:.1f} | {post_ms:.1f} | {rss_text} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer rounds and repeats (same table)"
    )
    parser.add_argument(
        "--rss-child", nargs=3, metavar=("MODEL", "CONFIG", "ITERS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child[0], args.rss_child[1], int(args.rss_child[2]))
        return 0
    rounds, warmup, repeats = (20, 2, 3) if args.quick else (30, 5, 5)
    default_threads = torch.get_num_threads()
    thread_counts = (1,) if args.quick else tuple(dict.fromkeys((1, default_threads)))
    lines = [
        f"torch {torch.__version__}, {rounds} rounds after {warmup} warm-up, "
        f"default threads {default_threads}"
    ]
    for model_name in ("mlp", "alexnet"):
        rss = {} if args.quick else {c: peak_rss(model_name, c, 23) for c in ("bare", *CONFIGS)}
        for threads in thread_counts:
            torch.set_num_threads(threads)
            lines += table(model_name, threads, ratios(model_name, CONFIGS, rounds, warmup), rss)
            print("\n".join(lines[-len(CONFIGS) - 3 :]), flush=True)
    torch.set_num_threads(1)
    lines += whole_cost_lines(whole_cost(repeats))
    few, many = (
        peak_rss("mlp", "hybridprof.profile", 20),
        peak_rss("mlp", "hybridprof.profile", 200),
    )
    lines.append(
        f"peak RSS of hybridprof.profile on the MLP: 20 iterations {few:.0f} MB, "
        f"200 iterations {many:.0f} MB, ratio {many / few:.2f} (target <= 1.3)"
    )
    lines.append("\nagreement on AlexNet, 1 thread, session vs per-call:")
    lines += agreement(10 if args.quick else 20)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
