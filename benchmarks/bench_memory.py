"""What `--profile-memory`'s per-layer memory costs, against three baselines, in one run.

    .venv/bin/python benchmarks/bench_memory.py            # 31 rounds per model (a few minutes)
    .venv/bin/python benchmarks/bench_memory.py --quick    # 9 rounds, same table

Each round runs one training step of the model under each variant, interleaved (the order
reversed every other round), 1 thread, and times the whole of it: the profiler's start, the step,
its stop and the post-processing that turns the events into numbers. Ratios are the median of the
per-round ratios (neighbouring measurements cancel most of this shared machine's drift).

Variants:
  torch       torch.autograd.profiler.profile(profile_memory=True) around the step: the profiler
              records the allocation events, nothing reads them
  torch+ka    the same plus key_averages(): torch producing its own per-op memory figures
  hybridprof  hybridprof's session strategy with profile_memory=True and no per-layer memory
              work: what `--profile-memory` cost before it (torchprof's net figures only)
  memory      the same with the per-layer memory (hooks, contexts, replay): an iteration that is
              not broken down, as all but the first of a run are
  breakdown   an iteration that is also broken down (the event tree read for the addresses)

`amortized` is a 10-iteration run: one breakdown and nine plain memory iterations. Patching
stays out of the timing (a run patches once), and so does making the strategy objects (made
afresh each round, see `one_round`); the runner's unmeasured warm step (which `hybridprof run`
adds to every measured iteration for the timings' sake) is left out of every variant alike.

Models: an MLP of 8 x (Linear(256, 256) + ReLU) on 64 x 256, and a small transformer (2 x
TransformerEncoderLayer(128, 4, 256), an embedding and a head, 8 x 64 tokens) with AdamW.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import torch
from torch import nn

from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.basics.patching import ForwardPatcher
from hybridprof.runtime.basics.quiet import quiet_fd2
from hybridprof.runtime.memory.capture import MemoryCapture
from hybridprof.runtime.strategies import make_strategy
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig

VARIANTS = ("torch", "torch+ka", "hybridprof", "memory", "breakdown")
HYBRIDPROF = ("hybridprof", "memory", "breakdown")


@dataclass
class Workload:
    name: str
    title: str
    model: nn.Module
    step: Callable[[], None]
    optimizers: tuple[Any, ...] = ()


def mlp() -> Workload:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(8):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 10))
    x = torch.randn(64, 256)

    def step() -> None:
        model(x).sum().backward()
        for p in model.parameters():
            p.grad = None

    return Workload("MLP", "MLP 8 x (Linear(256,256) + ReLU), 64 x 256, training step", model, step)


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1000, 128)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(128, 4, 256, dropout=0.1, batch_first=True) for _ in range(2)
        )
        self.head = nn.Linear(128, 1000)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def transformer() -> Workload:
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids, target = torch.randint(0, 1000, (8, 64)), torch.randint(0, 1000, (8, 64))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(ids).reshape(-1, 1000), target.reshape(-1))
        loss.backward()
        opt.step()

    step()  # the optimizer's state exists, as after any first step
    title = "transformer 2 x EncoderLayer(128) + AdamW, 8 x 64 tokens"
    return Workload("transformer", title, model, step, (opt,))


class Hybridprof:
    """The session strategy over the workload's model, with or without per-layer memory."""

    def __init__(self, work: Workload, memory: bool) -> None:
        plan = tree_plan(work.model, None, (), None, leaves_only=False)
        capture = MemoryCapture(work.model, optimizers=work.optimizers) if memory else None
        config = StrategyConfig(
            paths=plan.selected_paths(),
            compat=probe(),
            profile_memory=True,
            backward=True,
            memory=capture,
        )
        self.capture = capture
        self.strategy: Strategy = make_strategy("session", config)
        self.patcher = ForwardPatcher(work.model, config.paths, self.strategy.call)
        with quiet_fd2():
            self.strategy.begin()

    def run(self, step: Callable[[], None], breakdown: bool) -> None:
        """One iteration; with memory, broken down or not as asked."""
        if self.capture is not None and breakdown:
            self.capture.best_above = None  # this iteration is broken down again
        elif self.capture is not None:
            self.capture.best_above = 1 << 62  # this one is not
        strategy = self.strategy
        self.patcher.patch()
        try:
            with quiet_fd2():
                strategy.begin_iteration()
                strategy.start_measuring()
                step()
                strategy.end_iteration()
        finally:
            self.patcher.restore()

    def close(self) -> None:
        with quiet_fd2():
            self.strategy.end()


def torch_step(step: Callable[[], None], key_averages: bool) -> None:
    with quiet_fd2():
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            step()
        if key_averages:
            prof.key_averages()


def one_round(work: Workload, order: tuple[str, ...]) -> dict[str, float]:
    """Each variant's time for one step. hybridprof's strategies are made afresh each round
    (outside the timing, as a run makes its own once): on this machine one strategy object's
    profiler stop sometimes ran ~4x slower than another's for its whole life, whichever variant
    it was, and a fresh draw per round keeps that from landing on one variant only."""
    plain = Hybridprof(work, memory=False)
    full = Hybridprof(work, memory=True)
    run: dict[str, Callable[[], None]] = {
        "torch": lambda: torch_step(work.step, False),
        "torch+ka": lambda: torch_step(work.step, True),
        "hybridprof": lambda: plain.run(work.step, False),
        "memory": lambda: full.run(work.step, False),
        "breakdown": lambda: full.run(work.step, True),
    }
    times: dict[str, float] = {}
    try:
        full.run(work.step, True)  # a run's first measured iteration is broken down
        for name in order:
            gc.collect()
            start = perf_counter()
            run[name]()
            times[name] = perf_counter() - start
    finally:
        plain.close()
        full.close()
    return times


def rounds_of(work: Workload, rounds: int, warmup: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_no in range(warmup + rounds):
        measured = one_round(work, VARIANTS if round_no % 2 == 0 else VARIANTS[::-1])
        if round_no >= warmup:
            for name, seconds in measured.items():
                times[name].append(seconds)
    return times


def ratio(times: dict[str, list[float]], over: str, under: str) -> float:
    """The median of the per-round ratios."""
    return statistics.median(a / b for a, b in zip(times[over], times[under], strict=True))


def with_amortized(times: dict[str, list[float]]) -> dict[str, list[float]]:
    """A 10-iteration run's iteration: one broken down, nine not."""
    pairs = zip(times["memory"], times["breakdown"], strict=True)
    return {**times, "amortized": [(9 * plain + broken) / 10 for plain, broken in pairs]}


def report(work: Workload, times: dict[str, list[float]]) -> list[str]:
    lines = [f"\n{work.title}: {len(times['torch'])} rounds, medians"]
    for name in (*VARIANTS, "amortized"):
        ms = statistics.median(times[name]) * 1000
        lines.append(
            f"  {name:10s} {ms:8.2f} ms   / torch {ratio(times, name, 'torch'):5.2f}   "
            f"/ torch+ka {ratio(times, name, 'torch+ka'):5.2f}   "
            f"/ hybridprof {ratio(times, name, 'hybridprof'):5.2f}"
        )
    return lines


def summary(work: Workload, times: dict[str, list[float]]) -> str:
    return (
        f"  {work.name}: amortized --profile-memory / hybridprof's own profile_memory run "
        f"{ratio(times, 'amortized', 'hybridprof'):.2f} (target <= 1.20), / torch's "
        f"profile_memory with key_averages() {ratio(times, 'amortized', 'torch+ka'):.2f}, "
        f"/ torch's bare profile_memory session {ratio(times, 'amortized', 'torch'):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="9 rounds instead of 31")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds, warmup = (9, 2) if args.quick else (31, 3)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, 1 torch thread")
    lines = ["summary:"]
    for make in (mlp, transformer):
        work = make()
        times = with_amortized(rounds_of(work, rounds, warmup))
        print("\n".join(report(work, times)))
        lines.append(summary(work, times))
    print(f"\nload average after {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
