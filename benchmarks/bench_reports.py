"""Render time and size of the HTML and PDF reports for a 100-leaf and a 2,000-leaf model.

    .venv/bin/python benchmarks/bench_reports.py [--leaves 100 2000] [--repeats 3] [--iters 3] \
        [--browser]
    .venv/bin/python benchmarks/bench_reports.py --open OLD.html NEW.html [--repeats 3]

With `--browser`, each HTML report is also opened in headless Chromium (Debian's, through
Playwright) and the time to open it and to answer each interaction (expand a subtree, open an op
table, expand all, sort, collapse a subtree, scroll to the end, filter, clear the filter, collapse
all) is printed in ms, medians of `--repeats` fresh pages (see report_browser.py). `--leaves 14545`
makes a 16,001-row report. `--open` times reports already on disk instead, round after round
(one page of each file per round), with the median of each file's ratio to the first file's.

Each model (blocks of Linear+ReLU, all leaves profiled) is profiled for real by
`hybridprof.profile`; the baseline, measured in the same run and interleaved with ours, is what
torch itself needs to print a table of the same events: a `torch.profiler.profile` over the same
number of forwards, then `prof.key_averages().table()` (its first call, which also builds torch's
event list, as a user pays it). Medians over repeats, 1 thread. Ratios are ours / baseline.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

# Kineto prints profiler_start/stop lines on every start unless told not to (before torch loads).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting import write_report

WIDTH = 16


def make_model(leaves: int) -> nn.Module:
    """`leaves` leaves: blocks of 10 (5 x Linear+ReLU), like a deep MLP."""
    blocks, left = [], leaves
    while left > 0:
        n = min(10, left)
        layers = [nn.Linear(WIDTH, WIDTH) if i % 2 == 0 else nn.ReLU() for i in range(n)]
        blocks.append(nn.Sequential(*layers))
        left -= n
    return nn.Sequential(*blocks).eval()


def timed(fn: Callable[[], object]) -> float:
    # Collect first, so no block pays for the garbage the one before it left (weasyprint leaves a
    # lot).
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def baseline_table(model: nn.Module, x: torch.Tensor, iters: int) -> float:
    """Seconds for torch's key_averages().table() over `iters` profiled forwards of the model."""
    with (
        torch.no_grad(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof,
    ):
        for _ in range(iters):
            model(x)
    return timed(lambda: prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1))


def render_times(session: ProfileSession, out: Path, tag: str) -> dict[str, float]:
    """Each report from a fresh copy of the session: a session's layer table is built once and
    then shared, and each time here is meant to hold the building of its table."""
    html, pdf = out / f"{tag}.html", out / f"{tag}.pdf"
    return {
        "html_s": timed(lambda: write_report(replace(session), html, force=True)),
        "pdf_s": timed(lambda: write_report(replace(session), pdf, force=True)),
        "html_bytes": html.stat().st_size,
        "pdf_bytes": pdf.stat().st_size,
    }


def browser_rounds(files: list[Path], repeats: int) -> list[dict[str, list[float | None]]]:
    """Per file, each step's ms over `repeats` rounds (files interleaved within a round); None
    for a round where the step could not run."""
    from playwright.sync_api import sync_playwright
    from report_browser import launch, time_report

    runs: list[dict[str, list[float | None]]] = [{} for _ in files]
    with sync_playwright() as p:
        browser = launch(p)
        for _ in range(repeats):
            for path, run in zip(files, runs, strict=True):
                for step, ms in time_report(browser, path).items():
                    run.setdefault(step, []).append(ms)
        browser.close()
    return runs


def timed_median(values: list[float | None]) -> str:
    """The median of the rounds that timed the step, and how many did when some could not."""
    timed = [v for v in values if v is not None]
    if not timed:
        return f"{'n/a':>8}"
    shown = f"{statistics.median(timed):.0f}"
    return f"{shown + ('' if len(timed) == len(values) else f'({len(timed)})'):>8}"


def ratio_median(new: list[float | None], old: list[float | None]) -> str:
    """The median ratio over the rounds where both files timed the step."""
    pairs = [a / b for a, b in zip(new, old, strict=True) if a is not None and b]
    return f"{statistics.median(pairs):>8.3f}" if pairs else f"{'n/a':>8}"


def print_browser(files: list[Path], repeats: int) -> None:
    from report_browser import STEPS

    runs = browser_rounds(files, repeats)
    print(
        f"chromium, ms, medians of {repeats} pages (n/a: the step could not run; (k): of k "
        "pages that ran it): " + " ".join(f"{s:>8}" for s in STEPS)
    )
    for path, run in zip(files, runs, strict=True):
        medians = " ".join(timed_median(run[s]) for s in STEPS)
        print(f"{path.name[-30:]:>30} {path.stat().st_size / 2**20:5.1f} MB {medians}")
    for path, run in zip(files[1:], runs[1:], strict=True):
        ratios = " ".join(ratio_median(run[s], runs[0][s]) for s in STEPS)
        print(f"{'ratio ' + path.name[-24:]:>30} {'':>8} {ratios}")


def bench(leaves: int, repeats: int, iters: int, out: Path) -> dict[str, float]:
    model, x = make_model(leaves), torch.randn(4, WIDTH)
    session = hybridprof.profile(model, x, warmup=1, iters=iters)
    baseline_table(model, x, 1)  # the first torch.profiler in a process pays for importing inductor
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):  # interleaved: ours, then the baseline, each repeat
        for key, value in render_times(session, out, f"r{leaves}").items():
            runs.setdefault(key, []).append(value)
        runs.setdefault("baseline_s", []).append(baseline_table(model, x, iters))
    result = {k: statistics.median(v) for k, v in runs.items()}
    result["records"] = len(session.records)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument(
        "--browser", action="store_true", help="also time opening and using it in Chromium"
    )
    parser.add_argument(
        "--open", type=Path, nargs="+", help="only time these HTML reports in Chromium"
    )
    args = parser.parse_args()
    if args.open:
        print_browser(args.open, args.repeats)
        return 0
    torch.set_num_threads(1)
    print(
        f"torch {torch.__version__}, 1 thread, {args.iters} profiled iterations, "
        f"medians of {args.repeats}"
    )
    print(
        f"{'leaves':>6} {'records':>7} {'html s':>7} {'html MB':>8} {'pdf s':>7} {'pdf KB':>7} "
        f"{'torch table s':>13} {'html/torch':>10} {'pdf/torch':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="hp-bench-") as tmp:
        for leaves in args.leaves:
            r = bench(leaves, args.repeats, args.iters, Path(tmp))
            print(
                f"{leaves:>6} {int(r['records']):>7} {r['html_s']:>7.3f} "
                f"{r['html_bytes'] / 2**20:>8.2f} "
                f"{r['pdf_s']:>7.2f} {r['pdf_bytes'] / 1024:>7.0f} {r['baseline_s']:>13.3f} "
                f"{r['html_s'] / r['baseline_s']:>10.2f} {r['pdf_s'] / r['baseline_s']:>9.2f}"
            )
            if args.browser:
                print_browser([Path(tmp) / f"r{leaves}.html"], args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
