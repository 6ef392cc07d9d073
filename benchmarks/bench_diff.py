"""What `hybridprof diff base.json new.json --report x.html` costs on two 2,000-layer sessions.

    .venv/bin/python benchmarks/bench_diff.py [--layers 2000] [--iters 30] [--rounds 5]

The two sessions are made here (no torch work): `--layers` leaf records (Linear/ReLU, 2 ops each,
`--iters` per-iteration values with noise, one layer in 50 made 30% slower, and 10 layers renamed
so they are matched by class and shape), saved as session files. Each round times, interleaved,
the whole command in-process (read both files, compare, print, write the HTML) and, as the baseline,
`hybridprof report new.json -o x.html` (the run report of one of them). Medians of the rounds and
of the paired ratios are printed; on a shared machine wall time grows with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import statistics
import tempfile
import time
from pathlib import Path

from hybridprof.cli import main
from hybridprof.datamodel import (
    Environment,
    IterationSeries,
    ModuleRecord,
    ModuleTarget,
    OpStat,
    ProfilePlan,
    ProfileSession,
    Series,
    Stability,
    Stat,
)

ENV = Environment("0.1.0", "2.13.0+cpu", "3.11", "Linux", "bench CPU", 1, "cpu")


def make_session(layers: int, iters: int, seed: int, changed: bool) -> ProfileSession:
    rng = random.Random(seed)
    records, targets = [], []
    for index in range(layers):
        cls = "Linear" if index % 2 == 0 else "ReLU"
        path = f"blocks.{index // 2}.{'fc' if cls == 'Linear' else 'act'}"
        if changed and index % 200 == 0:
            path += "_renamed"
        center = 50.0 + (index % 37) * 10.0
        if changed and index % 50 == 0:
            center *= 1.3
        values = [center * (1 + rng.uniform(-0.03, 0.03)) for _ in range(iters)]
        ops = (
            OpStat("aten::addmm" if cls == "Linear" else "aten::relu", 1, center * 0.9, center),
            OpStat("aten::t", 1, center * 0.1, center * 0.1),
        )
        records.append(
            ModuleRecord(
                path=path,
                class_name=cls,
                calls=iters,
                self_cpu_us=Stat.of(values),
                total_cpu_us=Stat.of(values),
                input_shapes=("32x256",),
                output_shapes=("32x256",),
                param_count=65792 if cls == "Linear" else 0,
                ops=ops,
                per_iteration=IterationSeries(Series.of(values)),
            )
        )
        targets.append(ModuleTarget(path, cls, f"torch.nn.{cls}", 3, True, True, "leaf"))
    totals = [sum(r.per_iteration.self_cpu_us.values[i] for r in records) for i in range(iters)]  # type: ignore[union-attr]
    return ProfileSession(
        plan=ProfilePlan("Net", tuple(targets)),
        environment=ENV,
        records=tuple(records),
        strategy="session",
        iterations=iters,
        requested_iterations=iters,
        iteration_cpu_us=tuple(totals),
        stability=Stability("stable", 0.02, 0.5, 1, ""),
    )


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (this process) seconds of one command."""
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 0, argv
    return time.perf_counter() - wall, time.process_time() - cpu


def bench(layers: int, iters: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base, new = Path(folder) / "base.json", Path(folder) / "new.json"
        base.write_text(make_session(layers, iters, 1, changed=False).to_json())
        new.write_text(make_session(layers, iters, 2, changed=True).to_json())
        out, baseline_out = Path(folder) / "diff.html", Path(folder) / "run.html"
        diff_argv = ["diff", str(base), str(new), "--report", str(out), "--force"]
        report_argv = ["report", str(new), "-o", str(baseline_out), "--force"]
        timed(diff_argv)  # warm-up: imports, template compilation
        timed(report_argv)
        diffs, reports = [], []
        for _ in range(rounds):
            diffs.append(timed(diff_argv))
            reports.append(timed(report_argv))
        size = out.stat().st_size / 1e6
    print(f"{layers} layers x {iters} iterations, {rounds} rounds (medians; wall and CPU seconds)")
    for name, times in (("diff -> HTML", diffs), ("report -> HTML (baseline)", reports)):
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        print(f"{name:27s} wall {wall:.3f} s  cpu {cpu:.3f} s")
    ratios = [d[1] / r[1] for d, r in zip(diffs, reports, strict=True)]
    print(f"diff / report (CPU):        median of paired ratios {statistics.median(ratios):.2f}")
    print(f"diff HTML size:             {size:.1f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2000)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bench(args.layers, args.iters, args.rounds)
