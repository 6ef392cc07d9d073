"""Render time and size of the HTML and PDF reports for a 100-leaf and a 2,000-leaf model.

    .venv/bin/python scripts/bench_reports.py [--leaves 100 2000] [--repeats 3] [--iters 3] \
        [--browser]

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
    html, pdf = out / f"{tag}.html", out / f"{tag}.pdf"
    return {
        "html_s": timed(lambda: write_report(session, html, force=True)),
        "pdf_s": timed(lambda: write_report(session, pdf, force=True)),
        "html_bytes": html.stat().st_size,
        "pdf_bytes": pdf.stat().st_size,
    }


def browser_times(html: Path) -> tuple[float, float]:
    """Seconds to load `html` in headless Chromium, and to filter it down to one path."""
    import shutil

    from playwright.sync_api import expect, sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        page = browser.new_page()
        load = timed(lambda: page.goto(html.as_uri()))
        last = page.eval_on_selector_all("#layers tr.row", "rs => rs[rs.length - 1].dataset.path")
        shown = page.locator("#shown")
        start = time.perf_counter()
        page.fill("#filter", last)
        expect(shown).not_to_have_text(shown.text_content() or "", timeout=60_000)
        filtered = time.perf_counter() - start
        browser.close()
    return load, filtered


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
        "--browser", action="store_true", help="also time load and filter in Chromium"
    )
    args = parser.parse_args()
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
                load, filtered = browser_times(Path(tmp) / f"r{leaves}.html")
                print(f"{'':>6} chromium: load {load:.2f} s, filter to one path {filtered:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
