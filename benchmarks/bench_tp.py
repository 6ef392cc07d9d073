"""What profiling a tensor-parallel training loop costs, side by side in one run (issue 35).

    .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        benchmarks/bench_tp.py [--rounds 8] [--steps 10]

Two ranks (gloo, CPU, 1 thread each) train tests/fixtures/tp_train.py's model: two MLPs, each
`up` column parallel and `down` row parallel. Each round runs every configuration's window of
steps in turn (the order rotated round by round): bare steps; torch.profiler alone around the
same steps, without and with `record_shapes` (what a tensor-parallel model's block turns on for
its collectives' bytes); and the steps inside `hybridprof.Profile` (one warm-up step, then the
active ones; the window's close is between windows, not in a step). Every step's wall time is
taken with `perf_counter` on each rank; rank 0 prints, per configuration, the median over rounds
of its median step over the bare one's of the same round, with the interquartile range of those
ratios, and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

import hybridprof
from hybridprof.runtime.basics.quiet import quiet_fd2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
import tp_train  # the fixture's model: the benchmark and the test run the same

Step = Callable[[], None]


def training_step(model: torch.nn.Module) -> Step:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.rand(tp_train.BATCH, tp_train.WIDTH, generator=torch.Generator().manual_seed(1))

    def step() -> None:
        model(batch).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def timed(step: Step, steps: int, after: Callable[[], None] = lambda: None) -> float:
    """The median wall time of `steps` steps, in ms (the ranks start each window together)."""
    dist.barrier()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        after()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bare(model: torch.nn.Module, step: Step, steps: int) -> float:
    return timed(step, steps)


def torch_profiler(shapes: bool) -> Callable[[torch.nn.Module, Step, int], float]:
    def run(model: torch.nn.Module, step: Step, steps: int) -> float:
        with quiet_fd2(), torch.autograd.profiler.profile(record_shapes=shapes):
            return timed(step, steps)

    return run


def profiled(model: torch.nn.Module, step: Step, steps: int) -> float:
    schedule = hybridprof.schedule(wait=0, warmup=1, active=steps + 1)
    with quiet_fd2(), hybridprof.Profile(model, schedule=schedule) as prof:
        step()  # the warm-up step
        prof.step()
        return timed(step, steps, prof.step)


CONFIGS = {
    "bare again": bare,
    "torch.profiler": torch_profiler(False),
    "torch.profiler, record_shapes": torch_profiler(True),
    "hybridprof.Profile": profiled,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    model = tp_train.sharded_model()
    step = training_step(model)
    for _ in range(3):
        step()
    load_start = os.getloadavg()[0]
    ratios: dict[str, list[float]] = {name: [] for name in CONFIGS}
    bares: list[float] = []
    names = list(CONFIGS)
    for round_ in range(args.rounds):
        base = bare(model, step, args.steps)
        bares.append(base)
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            ratios[name].append(CONFIGS[name](model, step, args.steps) / base)
    if dist.get_rank() == 0:
        print(
            f"load {load_start:.2f} -> {os.getloadavg()[0]:.2f}; bare step (median over rounds) "
            f"{statistics.median(bares):.2f} ms; {args.rounds} rounds of {args.steps} steps"
        )
        for name, values in ratios.items():
            q1, _, q3 = statistics.quantiles(values, n=4)
            print(f"{name} / bare: {statistics.median(values):.3f}x (IQR {q1:.3f}-{q3:.3f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
