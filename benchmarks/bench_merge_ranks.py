"""Merging many ranks' sessions of a big model: time, peak memory, the merged HTML's size, and how
fast that HTML opens and filters in headless Chromium (issue: 8 ranks of a 10,000-layer model
with 20 iterations each merged in 60 s and 1 GB at most; the HTML under 20 MB, open and filter
within 5 s).

    .venv/bin/python benchmarks/bench_merge_ranks.py [--leaves 10000] [--ranks 8] [--iters 20] \
        [--rounds 3] [--no-browser]

One session is profiled for real (`hybridprof.profile` of bench_reports.py's tree of `--leaves`
leaves, 1 thread, `--iters` iterations); the rank sessions are made from it, each rank's times
scaled a little (rank r: x(1 + 0.03 r), so the merge's min/median/max and slowest rank differ)
with its own `rank` section, as torchrun's ranks save them. Each round then runs, in a new process,
`hybridprof merge session-rank*.json -o merged.json --report merged.html` and reads its wall time
and peak RSS (the child's ru_maxrss); the HTML's size; and with Chromium (Debian's, through
playwright) the time to open it and to filter its table (report_browser.py's measures).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # quiet profiler start/stop lines (before torch)

ROOT = Path(__file__).resolve().parent.parent
HYBRIDPROF = Path(sys.executable).with_name("hybridprof")


def base_session(leaves: int, iters: int) -> Any:
    import torch
    from bench_reports import WIDTH, make_model  # benchmarks/ is on sys.path (run as a script)

    import hybridprof

    model = make_model(leaves)
    return hybridprof.profile(model, torch.randn(4, WIDTH), warmup=1, iters=iters, threads=1)


def scaled(session: Any, factor: float) -> Any:
    """The session with every layer's and iteration's time x `factor`."""
    from hybridprof.datamodel import IterationSeries, Series, Stat

    def stat(value: Stat | None) -> Stat | None:
        return None if value is None else Stat(value.median * factor, value.min * factor,
                                               value.max * factor)  # fmt: skip

    records = []
    for record in session.records:
        series = record.per_iteration
        if series is not None:
            series = IterationSeries(
                self_cpu_us=Series.of([v * factor for v in series.self_cpu_us.values])
            )
        records.append(
            replace(
                record,
                self_cpu_us=stat(record.self_cpu_us),
                total_cpu_us=stat(record.total_cpu_us),
                per_iteration=series,
            )
        )
    return replace(
        session,
        records=tuple(records),
        iteration_cpu_us=tuple(v * factor for v in session.iteration_cpu_us),
        outside_cpu_us=stat(session.outside_cpu_us),
    )


def rank_sessions(session: Any, ranks: int, folder: Path) -> list[Path]:
    from hybridprof.datamodel.ranks import RankInfo, RankRun

    files = []
    for rank in range(ranks):
        factor = 1.0 + 0.03 * rank
        info = RankInfo(rank, ranks, rank, "bench-host", "gloo", "cpu")
        steps = tuple(v * factor for v in session.iteration_cpu_us)
        one = replace(scaled(session, factor), rank=RankRun(info, step_us=steps, comm_us=()))
        path = folder / f"session-rank{rank}.json"
        path.write_text(one.to_json())
        files.append(path)
    return files


def merge_once(files: list[Path], folder: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one `hybridprof merge` in a new process."""
    out, html = folder / "merged.json", folder / "merged.html"
    for stale in (out, html):
        stale.unlink(missing_ok=True)
    argv = [str(HYBRIDPROF), "merge", *map(str, files), "-o", str(out), "--report", str(html)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"merge failed: {done.stderr.strip()[-500:]}")
    # the largest child so far: each round's merge is the same work, so the maximum is its peak
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return wall, peak


def browser_ms(html: Path) -> dict[str, float | None]:
    from playwright.sync_api import sync_playwright
    from report_browser import launch, time_report

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            return time_report(browser, html)
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hp-merge-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        session = base_session(args.leaves, args.iters)
        files = rank_sessions(session, args.ranks, folder)
        size = sum(f.stat().st_size for f in files)
        print(
            f"{args.ranks} rank sessions of {len(session.records):,} layers x {args.iters} "
            f"iterations ({size / 1e6:.1f} MB) made in {time.perf_counter() - started:.1f} s; "
            f"load {os.getloadavg()[0]:.2f}"
        )
        walls, peak = [], 0
        for round_ in range(args.rounds):
            wall, peak = merge_once(files, folder)
            walls.append(wall)
            print(f"round {round_ + 1}: merge {wall:.2f} s, load {os.getloadavg()[0]:.2f}")
        html = folder / "merged.html"
        print(
            f"merge: median {statistics.median(walls):.2f} s over {args.rounds} rounds, peak RSS "
            f"{peak / 2**20:.0f} MiB; merged.html {html.stat().st_size / 1e6:.1f} MB"
        )
        if not args.no_browser:
            ms = browser_ms(html)
            shown = ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items() if v is not None)
            print(f"Chromium: {shown}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
