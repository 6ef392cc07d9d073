"""What profiling a training loop costs, measured side by side in one run (issue 22's criteria).

    .venv/bin/python benchmarks/bench_training.py            # full run (several minutes)
    .venv/bin/python benchmarks/bench_training.py --quick    # short run: fewer rounds

The loop is the issue's: two micro-batches of forward, cross-entropy and backward, then
`AdamW.step()` and `zero_grad()`, on two models at 1 thread: a 400-leaf MLP (200 x
Linear(256,256)+ReLU, input 32x256: the README's per-forward model) and a small transformer (two
pre-norm blocks of width 64 over 4x32 tokens). Every step's wall time is taken with
`perf_counter`; each round runs every configuration's window of steps in turn (the order rotated
round by round), and the median over rounds of each configuration's median step divided by the
bare one's of the same round is printed, with the spread of those ratios (interquartile range).

1. Steps outside the schedule's window: `with Profile(model, schedule=schedule(wait=...))` around
   the loop, the steps waited out, each followed by `prof.step()`, against bare steps (no block);
   "bare again" is the A/A control: two identical configurations, whose ratio shows the noise.
   Also `prof.step()` alone outside a window, per call, against an empty method call.
2. Steps inside the window (warm-up 1, active N, the default `session` strategy), against bare
   steps and against torch.profiler alone: one `torch.autograd.profiler.profile()` session around
   the same N steps (no ranges, no hooks), the floor hybridprof's own session stands on. The
   window's close (stopping the profiler, attributing its events, once per window, between steps)
   is printed apart, per step.

Every figure is printed with the load average at the start and the end of the run.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import hybridprof
from hybridprof.runtime.basics.quiet import quiet_fd2

Step = Callable[[], None]


class Block(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.act, self.heads = nn.GELU(), heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.blocks = nn.Sequential(Block(), Block())
        self.ln, self.head = nn.LayerNorm(64), nn.Linear(64, 1000)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(self.blocks(self.emb(tokens))))


@dataclass
class Loop:
    model: nn.Module
    step: Step


def loop_of(name: str) -> Loop:
    torch.manual_seed(0)
    model: nn.Module
    if name == "mlp":
        layers: list[nn.Module] = []
        for _ in range(200):
            layers += [nn.Linear(256, 256), nn.ReLU()]
        model = nn.Sequential(*layers)
        x, y = torch.randn(32, 256), torch.randint(0, 256, (32,))
    else:
        model = Transformer()
        x, y = torch.randint(0, 1000, (4, 32)), torch.randint(0, 1000, (4, 32))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        for _ in range(2):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1)) / 2
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return Loop(model, step)


def timed(step: Step, after: Step | None = None) -> float:
    start = time.perf_counter()
    step()
    if after is not None:
        after()
    return (time.perf_counter() - start) * 1e6


def bare(loop: Loop, n: int) -> list[float]:
    return [timed(loop.step) for _ in range(n)]


def waiting(loop: Loop, n: int) -> list[float]:
    """Steps the schedule waits out, in a with-block, each ended by `prof.step()`."""
    plan = hybridprof.schedule(wait=10**9, active=1)
    with hybridprof.Profile(loop.model, leaves_only=False, schedule=plan) as prof:
        return [timed(loop.step, prof.step) for _ in range(n)]


def torch_floor(loop: Loop, n: int) -> list[float]:
    """The same steps inside one autograd profiler session (started after a warm-up step)."""
    profiler = torch.autograd.profiler.profile()
    with quiet_fd2():  # torch says when its profiler starts and stops, on fd 2
        profiler.__enter__()
    try:
        loop.step()  # its warm-up, as hybridprof's window has one
        times = [timed(loop.step) for _ in range(n)]
    finally:
        with quiet_fd2():
            profiler.__exit__(None, None, None)
    len(profiler.kineto_results.events())  # read once, outside the timed steps
    return times


@dataclass
class Active:
    steps_us: list[float]
    close_us: float  # the window's close (stop, attribute), once


def active(loop: Loop, n: int) -> Active:
    """Warm-up 1 and N active steps of a window; the last step's `prof.step()` closes it."""
    plan = hybridprof.schedule(wait=0, warmup=1, active=n)
    with hybridprof.Profile(loop.model, leaves_only=False, schedule=plan) as prof:
        timed(loop.step, prof.step)  # the warm-up step
        times = [timed(loop.step, prof.step) for _ in range(n - 1)]
        times.append(timed(loop.step))
        close = timed(prof.step)  # the window closes here: stop and attribute
    assert prof.iterations == n, prof.iterations
    return Active(times, close)


def ratios(rounds: list[dict[str, float]], name: str) -> tuple[float, float, float]:
    """The median over rounds of `name`'s median step over bare's, and its quartiles."""
    values = sorted(r[name] / r["bare"] for r in rounds)
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return median, q1, q3


def show(label: str, rounds: list[dict[str, float]], name: str) -> None:
    median, q1, q3 = ratios(rounds, name)
    print(f"  {label:44s} {median:6.3f}x   (IQR {q1:.3f}-{q3:.3f})")


def outside_window(name: str, rounds: int, n: int) -> None:
    loop = loop_of(name)
    bare(loop, 3)
    results: list[dict[str, float]] = []
    configs: dict[str, Callable[[Loop, int], list[float]]] = {
        "bare": bare,
        "bare again": bare,
        "waited-out step + prof.step()": waiting,
    }
    for index in range(rounds):
        order = list(configs)
        order = order[index % len(order) :] + order[: index % len(order)]
        medians = {c: statistics.median(configs[c](loop, n)) for c in order}
        results.append(medians)
    step = statistics.median(r["bare"] for r in results)
    print(
        f"{name}: steps outside the window ({rounds} rounds x {n} steps; bare step {step:.0f} us)"
    )
    show("bare again (A/A control)", results, "bare again")
    show("waited-out step + prof.step()", results, "waited-out step + prof.step()")


def inside_window(name: str, rounds: int, n: int) -> None:
    loop = loop_of(name)
    bare(loop, 3)
    results: list[dict[str, float]] = []
    closes: list[float] = []
    for index in range(rounds):
        order = ["bare", "torch.profiler", "active"]
        order = order[index % 3 :] + order[: index % 3]
        medians: dict[str, float] = {}
        for config in order:
            gc.collect()
            if config == "bare":
                medians[config] = statistics.median(bare(loop, n))
            elif config == "torch.profiler":
                medians[config] = statistics.median(torch_floor(loop, n))
            else:
                window = active(loop, n)
                medians[config] = statistics.median(window.steps_us)
                closes.append(window.close_us / n)
        results.append(medians)
    step = statistics.median(r["bare"] for r in results)
    print(f"{name}: steps inside the window ({rounds} rounds x {n} steps; bare {step:.0f} us)")
    show("torch.profiler alone (the floor)", results, "torch.profiler")
    show("hybridprof active step (session strategy)", results, "active")
    over = sorted(r["active"] / r["torch.profiler"] for r in results)
    print(f"  {'hybridprof active / torch.profiler':44s} {statistics.median(over):6.3f}x")
    close = statistics.median(closes)
    print(
        f"  window close (stop + attribute), per step:  {close:.0f} us ({close / step:.2f} steps)"
    )


class _Empty:
    def step(self) -> None:
        return None


def step_call_cost() -> None:
    """`prof.step()` outside a window, per call, against an empty method call."""
    model = nn.Linear(4, 4)
    plan = hybridprof.schedule(wait=10**9, active=1)
    calls = 200_000
    with hybridprof.Profile(model, schedule=plan) as prof:
        ours = min(timeit.repeat(prof.step, number=calls, repeat=5)) / calls * 1e9
    empty = _Empty()
    base = min(timeit.repeat(empty.step, number=calls, repeat=5)) / calls * 1e9
    print(
        f"prof.step() outside a window: {ours:.0f} ns a call (an empty method call {base:.0f} ns)"
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--models", nargs="+", default=["transformer", "mlp"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds, n = (5, 6) if args.quick else (15, 10)
    print(f"torch {torch.__version__}, 1 thread; start: {load()}")
    step_call_cost()
    for name in args.models:
        outside_window(name, rounds * 2, n)
        inside_window(name, rounds, n)
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
