"""Saved-session size, and what each record's per-iteration series add to it.

    .venv/bin/python scripts/bench_session_size.py [--leaves 10000] [--iters 5 30]

A model of `--leaves` small leaves (blocks of Linear+ReLU, as scripts/bench_reports.py) is profiled
for real by `hybridprof.profile` (1 thread, 1 warm-up) for each iteration count; the session JSON
is measured as saved, and again with every record's `per_iteration` series taken out, so the
difference is what the series cost.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # quiet profiler start/stop lines (before torch)

import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession

WIDTH = 16


def make_model(leaves: int) -> nn.Module:
    """`leaves` leaves: blocks of 10 (5 x Linear+ReLU)."""
    blocks, left = [], leaves
    while left > 0:
        n = min(10, left)
        layers = [nn.Linear(WIDTH, WIDTH) if i % 2 == 0 else nn.ReLU() for i in range(n)]
        blocks.append(nn.Sequential(*layers))
        left -= n
    return nn.Sequential(*blocks).eval()


def without_series(session: ProfileSession) -> ProfileSession:
    return replace(session, records=tuple(replace(r, per_iteration=None) for r in session.records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--iters", type=int, nargs="+", default=[5, 30])
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = make_model(args.leaves)
    x = torch.randn(8, WIDTH)
    print(f"{args.leaves} leaves, 1 thread")
    print("iterations | records | session MB | without series MB | series MB (share) | run s")
    for iters in args.iters:
        start = time.perf_counter()
        session = hybridprof.profile(model, x, warmup=1, iters=iters)
        seconds = time.perf_counter() - start
        full = len(session.to_json().encode())
        bare = len(without_series(session).to_json().encode())
        print(
            f"{iters:10d} | {len(session.records):7d} | {full / 1e6:10.2f} | {bare / 1e6:17.2f} | "
            f"{(full - bare) / 1e6:6.2f} ({100 * (full - bare) / full:4.1f}%) | {seconds:5.0f}"
        )


if __name__ == "__main__":
    main()
