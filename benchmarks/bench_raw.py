"""What `Profile.raw()` costs the first time: torchprof's event lists on the 400-leaf MLP.

    .venv/bin/python benchmarks/bench_raw.py [--rounds 5] [--forwards 20]

Each round profiles `--forwards` forwards of the MLP (200 x Linear(256,256)+ReLU, input 32x256,
1 thread) in one `with Profile(...)` block, then times the first `raw()` of each strategy, split
for the default strategy into the op attribution (what `session()` would also pay) and building
torch's EventLists of FunctionEvents. Wall and CPU (process) time are printed: on a shared machine
the wall time grows with the load, the CPU time much less. The bare forwards of the same round are
timed too, so the cost can be read as a multiple of them.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import hybridprof


def mlp() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(200):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers).eval()


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def one_round(model: nn.Module, x: torch.Tensor, forwards: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    with torch.no_grad():
        out["bare forwards"] = timed(lambda: [model(x) for _ in range(forwards)])
        for strategy in ("session", "per-call", "timer"):
            with hybridprof.Profile(model, strategy=strategy) as prof:
                for _ in range(forwards):
                    model(x)
            if strategy == "session":
                out["session: attribution"] = timed(prof._stopped().measure)
                out["session: event lists"] = timed(prof.raw)
            else:
                out[f"{strategy}: raw()"] = timed(prof.raw)
            events = sum(len(call) for calls in prof.raw()[1].values() for call in calls)
            out[f"{strategy}: events"] = (events, events)
            del prof
            gc.collect()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--forwards", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, x = mlp(), torch.rand(32, 256)
    rounds = [one_round(model, x, args.forwards) for _ in range(args.rounds)]
    print(
        f"400-leaf MLP, {args.forwards} forwards in the with-block, {args.rounds} rounds, medians"
    )
    print(f"{'':24} {'wall s':>8} {'cpu s':>8}")
    for key in rounds[0]:
        wall = statistics.median(r[key][0] for r in rounds)
        cpu = statistics.median(r[key][1] for r in rounds)
        if key.endswith("events"):
            print(f"{key:24} {int(wall):>8}")
        else:
            print(f"{key:24} {wall:8.3f} {cpu:8.3f}")
    first = [r["session: attribution"][0] + r["session: event lists"][0] for r in rounds]
    ratio = [f / r["bare forwards"][0] for f, r in zip(first, rounds, strict=True)]
    print(
        f"session first raw() total: {statistics.median(first):.3f} s wall, "
        f"{statistics.median(ratio):.2f}x the bare forwards"
    )


if __name__ == "__main__":
    main()
