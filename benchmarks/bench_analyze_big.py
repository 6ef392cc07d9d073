"""`hybridprof analyze` on generated sources of growing size: time and peak memory grow linearly.

Each source is one nn.Module class with N children made in `__init__` (`self.layer_i =
nn.Linear(4, 4)`) and called in `forward` (`x = self.layer_i(x)`), ~70 bytes per child per
method. Every size is analysed in a fresh process, `--static-only` (the source alone) and in full
(the model imported and built too), round after round with the sizes interleaved; medians of the
rounds. The child's CPU time, wall time and peak RSS (from wait4) are printed, and the cost above
the smallest size (interpreter, torch, the model's first layers) per 1,000 children more:
constant when the growth is linear, growing with N when it is not.

usage: .venv/bin/python benchmarks/bench_analyze_big.py [--sizes 500 1000 2000 4000]
       [--rounds 3] [--baseline DIR]
--baseline DIR: also time the `hybridprof/` package in DIR (another version, e.g. from `git
archive COMMIT hybridprof | tar -x -C DIR`), interleaved with this one in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def source(children: int) -> str:
    lines = ["import torch", "from torch import nn", "", "class Big(nn.Module):"]
    lines += ["    def __init__(self):", "        super().__init__()"]
    lines += [f"        self.layer_{i} = nn.Linear(4, 4)" for i in range(children)]
    lines += ["", "    def forward(self, x):"]
    lines += [f"        x = self.layer_{i}(x)" for i in range(children)]
    lines += ["        return x", "", "def build_model():", "    return Big()", ""]
    lines += ["def example_inputs():", "    return (torch.randn(2, 4),)"]
    return "\n".join(lines) + "\n"


def measured(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS MB) of one run; the run must succeed. CPU time
    (user + system, from wait4) is the figure to compare: on a shared machine the wall time
    mostly measures the other work."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr is not None else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{err}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="a folder holding another version's hybridprof/")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    versions = {"this": env}
    if args.baseline:
        versions["baseline"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
    modes = {"static": ["--static-only"], "full": []}
    results: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    start_load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for n in args.sizes:
            files[n] = Path(folder) / f"big{n}.py"
            files[n].write_text(source(n))
        for _ in range(args.rounds):
            for n in args.sizes:
                for mode, extra in modes.items():
                    for version, version_env in versions.items():
                        argv = [sys.executable, "-m", "hybridprof", "analyze", str(files[n])]
                        argv += [*extra, "-o", "-"]
                        runs = results.setdefault((version, mode, n), [])
                        runs.append(measured(argv, version_env, folder))
        sizes_kb = {n: files[n].stat().st_size / 1024 for n in args.sizes}
    load = f"load average {start_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    print(f"{load} ({os.cpu_count()} cores); medians of {args.rounds} rounds; per 1,000: the cost "
          "above the smallest size per 1,000 children more (constant when linear)")  # fmt: skip
    head = f"{'version':8} {'mode':7} {'children':>8} {'KB':>6} {'cpu s':>7} {'wall s':>7}"
    print(f"{head} {'MB':>6} {'cpu s/1000':>10} {'MB/1000':>8}")
    for version in versions:
        for mode in modes:
            first = args.sizes[0]
            base_cpu = statistics.median(r[0] for r in results[(version, mode, first)])
            base_mb = statistics.median(r[2] for r in results[(version, mode, first)])
            for n in args.sizes:
                cpu, wall, rss = (
                    statistics.median(r[i] for r in results[(version, mode, n)]) for i in range(3)
                )
                more = (n - first) / 1000
                per = ""
                if more:
                    per = f"{(cpu - base_cpu) / more:>10.2f} {(rss - base_mb) / more:>8.0f}"
                row = f"{version:8} {mode:7} {n:>8} {sizes_kb[n]:>6.0f} {cpu:>7.2f} {wall:>7.2f}"
                print(f"{row} {rss:>6.0f} {per}")


if __name__ == "__main__":
    main()
