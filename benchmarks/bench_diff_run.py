"""What `hybridprof diff --run` costs against the two runs it replaces, measured side by side.

    .venv/bin/python benchmarks/bench_diff_run.py [--iters 30] [--rounds 5] [--size 64]

Two model files are written to a temporary folder: a small conv net (stem, three conv/BN/ReLU
blocks, pool, head; `--size` x `--size` input) and the same with one block's conv doing 3x the
work. Each round times, interleaved, with `--threads 1`:

- diff:     `hybridprof diff --run base.py new.py --iters N` (load both, plan both, measure the
            profiler's per-op cost, warm up and measure N pairs, compare, print the summary);
- two runs: `hybridprof run base.py --iters N -o a.json` then the same for new.py (load, plan,
            warm up, measure, save the session, print the table);

both in this process through the command's `main` (the ~2 s of starting Python and importing torch,
which two separate commands pay twice and the diff once, are left out, so the ratio is the
comparison's own overhead), and the same two parts of the runtime alone: `run_paired` against two
calls of the runtime's `run` (what `hybridprof.profile` calls) on models already loaded and
planned. The median of the per-round ratios is
printed, with the load average; on a shared machine wall times grow with the load, ratios less so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from hybridprof.cli import main
from hybridprof.files.loader import load_model
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.runs.fixed import run
from hybridprof.runtime.runs.interleaved import run_paired
from hybridprof.runtime.runs.lanes import LaneModel
from hybridprof.runtime.runs.options import RunOptions

MODEL = """
import torch
from torch import nn

REPS = {reps}


class Block(nn.Module):
    def __init__(self, c, reps=1):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.act = nn.ReLU()
        self.reps = reps

    def forward(self, x):
        for _ in range(self.reps):
            y = self.conv(x)
        return self.act(self.bn(y))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.Sequential(Block(16), Block(16, REPS), Block(16))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.pool(self.blocks(self.stem(x))).flatten(1))


def build_model():
    return Net(), (torch.rand(1, 3, {size}, {size}),)
"""


def quiet_main(argv: list[str]) -> float:
    """Wall seconds of one command, its output swallowed."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    assert code in (0, 1), (argv, code)
    return time.perf_counter() - start


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench(iters: int, rounds: int, size: int) -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        base, new = Path(folder) / "base.py", Path(folder) / "new.py"
        base.write_text(MODEL.format(reps=1, size=size))
        new.write_text(MODEL.format(reps=3, size=size))
        common = ["--threads", "1", "--iters", str(iters)]
        diff_argv = ["diff", "--run", str(base), str(new), *common]

        def run_argv(model: Path) -> list[str]:
            session = Path(folder) / f"{model.stem}.json"
            return ["run", str(model), *common, "-o", str(session), "--force"]

        def two_runs() -> float:
            return quiet_main(run_argv(base)) + quiet_main(run_argv(new))

        loaded = [load_model(path) for path in (base, new)]
        sides = [LaneModel(m.module, m.inputs, tree_plan(m.module, None, (), None)) for m in loaded]
        opts = RunOptions(iters=iters, threads=1)

        def paired() -> object:
            return run_paired(sides[0], sides[1], opts)

        def separate() -> object:
            return [run(s.model, s.inputs, s.plan, opts) for s in sides]

        quiet_main(diff_argv), two_runs(), paired(), separate()  # warm-up: imports, first runs
        cli: list[tuple[float, float]] = []
        runtime: list[tuple[float, float]] = []
        for _ in range(rounds):
            cli.append((quiet_main(diff_argv), two_runs()))
            runtime.append((timed(paired), timed(separate)))
    load = os.getloadavg()[0]
    shape = f"{size}x{size} input"
    print(f"{iters} iterations a side, {shape}, 1 thread, {rounds} rounds, load {load:.1f}")
    for name, rows in (("whole commands", cli), ("runtime only", runtime)):
        diff_s = statistics.median(d for d, _ in rows)
        runs_s = statistics.median(r for _, r in rows)
        ratio = statistics.median(d / r for d, r in rows)
        print(
            f"{name:15s} diff --run {diff_s:.3f} s, two runs {runs_s:.3f} s: "
            f"ratio {ratio:.3f} (median of per-round ratios)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=64)
    args = parser.parse_args()
    bench(args.iters, args.rounds, args.size)
