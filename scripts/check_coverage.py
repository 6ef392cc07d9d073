"""How completely `hybridprof run` accounts for a step, on model files given on the command line.

    .venv/bin/python scripts/check_coverage.py scripts/coverage_models/mha_decoder.py
    .venv/bin/python scripts/check_coverage.py scripts/coverage_models/*.py --chain 1000

For each model file it runs the default `hybridprof run --threads 1` (every module that runs a
forward is measured) and `hybridprof run --threads 1 --backward`, reads the saved sessions back,
and prints:

- self/iter: the rows' self CPU times (forward) summed, as a share of the median iteration's
  profiled CPU time (complete attribution: ~100%); each iteration adds up exactly (the session
  strategy measures the outside time op by op), so a gap here is noise: a pause (another
  process, the OS) lands in a different layer each iteration and a row's median leaves it out
  while the median iteration keeps it. `min` repeats the figure with per-row minimums against
  the quickest iteration, the least disturbed values, and the 1-minute load average is printed;
- bare parents: rows with children but no total (should be none);
- root/iter: the root's total CPU time against the median iteration;
- outside: the `(outside modules)` row of the forward run;
- step sum: forward self + backward self of every row + the outside row, against the median
  training step (--backward).

`--chain N` also profiles a chain of N identical Linear(16,16) layers and prints the first layer's
median self time against the chain's median layer (an artifact such as the profiler's restart or a
cold cache shows up as a first layer far above the others). The files in scripts/coverage_models/
are a decoder on torch's nn.MultiheadAttention and Hugging Face GPT-2 and BERT built from configs
(those two need `pip install transformers`; no weights are downloaded).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hybridprof.analysis.tree import tree_rows
from hybridprof.cli import main as cli_main
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session


@dataclass(frozen=True, slots=True)
class Coverage:
    self_share: float  # rows' forward self times / median iteration
    min_share: float  # rows' quickest self times / the quickest iteration
    bare_parents: tuple[str, ...]
    root_share: float  # root total / median iteration
    outside_us: float
    iteration_us: float
    step_share: float  # (fwd self + bwd self + outside) / median training step
    step_min_share: float  # the same from minimums, against the quickest step


def run_session(model_file: Path, extra: list[str], iters: int, folder: Path) -> ProfileSession:
    out = folder / f"{model_file.stem}{'-bwd' if extra else ''}.json"
    argv = ["run", str(model_file), "--threads", "1", "--iters", str(iters), "-o", str(out)]
    with contextlib.redirect_stdout(io.StringIO()):  # the tables: not what this script shows
        code = cli_main([*argv, *extra, "--force"])
    if code != 0:
        raise SystemExit(f"hybridprof run failed on {model_file} (exit {code})")
    return load_session(out)


def median_iteration(session: ProfileSession) -> float:
    return float(statistics.median(session.iteration_cpu_us))


def coverage(forward: ProfileSession, training: ProfileSession) -> Coverage:
    iteration = median_iteration(forward)
    own = sum(r.self_cpu_us.median for r in forward.records)
    quickest = sum(r.self_cpu_us.min for r in forward.records)
    bare = tuple(
        row.path or "(root)"
        for row in tree_rows(forward)
        if row.has_children and row.record is None
    )
    root = forward.record("")
    outside = forward.outside_cpu_us.median if forward.outside_cpu_us else float("nan")
    step = median_iteration(training)
    both = sum(
        r.self_cpu_us.median + (r.backward_self_cpu_us.median if r.backward_self_cpu_us else 0.0)
        for r in training.records
    )
    both += training.outside_cpu_us.median if training.outside_cpu_us else 0.0
    both_min = sum(
        r.self_cpu_us.min + (r.backward_self_cpu_us.min if r.backward_self_cpu_us else 0.0)
        for r in training.records
    )
    both_min += training.outside_cpu_us.min if training.outside_cpu_us else 0.0
    return Coverage(
        self_share=own / iteration,
        min_share=quickest / min(forward.iteration_cpu_us),
        bare_parents=bare,
        root_share=(root.total_cpu_us.median / iteration) if root else float("nan"),
        outside_us=outside,
        iteration_us=iteration,
        step_share=both / step,
        step_min_share=both_min / min(training.iteration_cpu_us),
    )


def chain_first_layer(layers: int, iters: int) -> tuple[float, float]:
    """(first layer's median self us, the chain's median layer's) under the default run."""
    import torch
    from torch import nn

    from hybridprof.api import profile

    torch.manual_seed(0)
    chain = nn.Sequential(*[nn.Linear(16, 16) for _ in range(layers)]).eval()
    session = profile(chain, torch.randn(4, 16), iters=iters, threads=1)
    medians = [r.self_cpu_us.median for r in session.records if r.path != ""]
    return medians[0], float(statistics.median(medians))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="model files (build_model + inputs)")
    parser.add_argument("--iters", type=int, default=30, help="measured iterations per run (30)")
    parser.add_argument("--chain", type=int, default=0, help="also a chain of N Linear(16,16)")
    args = parser.parse_args(argv)
    header = (
        f"{'model':<16} {'self/iter':>9} {'min':>7} {'root/iter':>9} {'outside':>10} "
        f"{'iteration':>11} {'step sum':>9} {'min':>7}  bare parents"
    )
    if args.models:
        print(header)
    with tempfile.TemporaryDirectory(prefix="hybridprof-coverage-") as tmp:
        for model_file in args.models:
            forward = run_session(model_file, [], args.iters, Path(tmp))
            training = run_session(model_file, ["--backward"], args.iters, Path(tmp))
            c = coverage(forward, training)
            print(
                f"{model_file.stem:<16} {c.self_share:>9.1%} {c.min_share:>7.1%} "
                f"{c.root_share:>9.1%} {c.outside_us:>8.1f}us {c.iteration_us / 1000:>9.2f}ms "
                f"{c.step_share:>9.1%} {c.step_min_share:>7.1%}  "
                f"{', '.join(c.bare_parents) or 'none'}"
            )
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.chain:
        first, middle = chain_first_layer(args.chain, args.iters)
        print(
            f"chain of {args.chain} Linear(16,16): first layer {first:.1f}us, median layer "
            f"{middle:.1f}us, ratio {first / middle:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
