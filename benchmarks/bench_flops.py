"""Cost of `run --flops`: the counting pass against a bare step and FlopCounterMode, and the peak.

    .venv/bin/python benchmarks/bench_flops.py            # 15 rounds after 3 warm-up
    .venv/bin/python benchmarks/bench_flops.py --quick    # 5 rounds

Models: the bundled AlexNet-like (1x3x224x224) and a 400-leaf MLP (200 x Linear(256,256)+ReLU,
input 32x256), 1 thread. Per round, interleaved: a bare step, the same step under
torch.utils.flop_counter.FlopCounterMode, and hybridprof's counting pass (`count_work`: hooks on
every module, the dispatch-mode counter, attribution); the medians of the per-round ratios are
printed (the machine is shared and noisy; neighbouring measurements cancel most drift). A step is
a forward, or with backward forward + loss + backward. The first dispatch-mode use in a process
costs a one-time torch set-up (seconds) for FlopCounterMode and hybridprof alike: it is paid in the
warm-up rounds and printed separately. Then the peak microbenchmark is timed with an empty cache
(it must stay under 3 s), and the totals are checked against FlopCounterMode's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hybridprof.datamodel import MachinePeak
from hybridprof.examples import alexnet
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.workload import forward_once, training_step
from hybridprof.runtime.flops.counter import count_work
from hybridprof.runtime.flops.peak import PeakRequest, machine_peak

GIVEN = MachinePeak(1.0, 1.0, "given", "benchmark")


def build(name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if name == "alexnet":
        return alexnet().eval(), torch.rand(1, 3, 224, 224)
    layers: list[nn.Module] = []
    for _ in range(200):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers).eval(), torch.randn(32, 256)


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def steps(model: nn.Module, x: torch.Tensor, backward: bool) -> dict[str, Callable[[], object]]:
    inputs = ModelInputs((x,), {})
    step = training_step if backward else forward_once

    def counter() -> int:
        with FlopCounterMode(display=False) as mode:
            step(model, inputs)
        return mode.get_total_flops()

    def ours() -> object:
        return count_work(model, inputs, (), backward, GIVEN)

    return {"bare": lambda: step(model, inputs), "FlopCounterMode": counter, "hybridprof": ours}


def bench(name: str, backward: bool, rounds: int) -> None:
    model, x = build(name)
    if backward:
        model.train()
    work = steps(model, x, backward)
    first = {k: timed(f) for k, f in work.items()}
    for _ in range(2):
        for f in work.values():
            f()
    ratios: dict[str, list[float]] = {"FlopCounterMode": [], "hybridprof": [], "vs counter": []}
    bare_s: list[float] = []
    for _ in range(rounds):
        t = {k: timed(f) for k, f in work.items()}
        bare_s.append(t["bare"])
        ratios["FlopCounterMode"].append(t["FlopCounterMode"] / t["bare"])
        ratios["hybridprof"].append(t["hybridprof"] / t["bare"])
        ratios["vs counter"].append(t["hybridprof"] / t["FlopCounterMode"])
    kind = "forward+backward" if backward else "forward"
    med = {k: statistics.median(v) for k, v in ratios.items()}
    print(
        f"{name:8s} {kind:16s} bare {1e3 * statistics.median(bare_s):7.1f} ms | "
        f"FlopCounterMode {med['FlopCounterMode']:.2f}x | hybridprof pass "
        f"{med['hybridprof']:.2f}x bare, {med['vs counter']:.2f}x FlopCounterMode | "
        f"first calls: counter {first['FlopCounterMode']:.2f} s, ours {first['hybridprof']:.2f} s"
    )
    check_totals(model, x, backward)


def check_totals(model: nn.Module, x: torch.Tensor, backward: bool) -> None:
    inputs = ModelInputs((x,), {})
    with FlopCounterMode(display=False) as mode:
        (training_step if backward else forward_once)(model, inputs)
    work = count_work(model, inputs, (), backward, GIVEN)
    layers = sum(w.flops + w.backward_flops for w in work.layers)
    expected = mode.get_total_flops()
    print(f"         sum over layers {layers:,} vs FlopCounterMode {expected:,} FLOPs")


def bench_peak() -> None:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        request = PeakRequest(torch.device("cpu"), torch.float32, torch.get_num_threads())
        start = time.perf_counter()
        peak = machine_peak(request)
        measured = time.perf_counter() - start
        start = time.perf_counter()
        machine_peak(request)
        cached = time.perf_counter() - start
    print(
        f"peak: {peak.gflops:.1f} GFLOP/s, {peak.gbps:.1f} GB/s ({peak.how}); "
        f"measuring took {measured:.2f} s, reading the cache {1e3 * cached:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds = 5 if args.quick else 15
    for name in ("alexnet", "mlp"):
        for backward in (False, True):
            bench(name, backward, rounds)
    bench_peak()


if __name__ == "__main__":
    main()
