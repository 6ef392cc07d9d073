"""Rendering cost of a deep module tree: a chain of N nested layers (a, a.a, a.a.a, ...).

    .venv/bin/python benchmarks/bench_deep_tree.py [--depths 125 250 500] [--rounds 3] \
        [--baseline DIR]

Each round, a fresh process per depth builds the chain session by hand (no torch) and times, in
CPU seconds: the layer table (`analysis.layer_table`: tree rows, shares, totals), the terminal's
tree table (`render_text`), the .txt report and the HTML report. Printed: the median over the
rounds of each, and each step's growth per doubling of the depth (the time at 2N over the time at
N: about 2 is linear in the rows; the .txt report also prints an indentation as wide as the
depth on every row, so its output, and its time, grow as N squared).

`--baseline DIR`: a checkout of another hybridprof version (`git archive REV | tar -x -C DIR`); its
rounds run with DIR first on PYTHONPATH, interleaved with this checkout's, and the median ratio
(this / baseline) per step and depth is printed. A step that fails (RecursionError) shows nan.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("layer_table", "terminal", "txt", "html")


def chain_session(depth: int) -> object:
    """`depth` nested layers under a root, each 1 us of its own (tests/sessions.py's factories)."""
    from dataclasses import replace

    sys.path.insert(0, str(ROOT))
    from tests.sessions import record, small_session, target

    session = small_session()
    paths = [".".join(["a"] * k) for k in range(1, depth + 1)]
    records = tuple(
        record(p, "Block", 1.0, float(depth - i), is_leaf=i == depth - 1)
        for i, p in enumerate(paths)
    )
    targets = (session.plan.targets[0], *(target(p, "Block", leaf=False) for p in paths))
    return replace(session, records=records, plan=replace(session.plan, targets=targets))


def cpu_seconds(step: Callable[[object], object], session: object) -> float:
    """CPU seconds of `step(session)`; NaN when it fails (hybridprof before issue 25 ran out of
    stack on the HTML report of a chain ~1,000 deep)."""
    start = time.process_time()
    try:
        step(session)
    except RecursionError:
        return float("nan")
    return time.process_time() - start


def measure(depth: int) -> dict[str, float]:
    """One round at one depth, in this process (the child)."""
    # Names every version has (a --baseline checkout runs this same file): the registry by
    # extension, and str(session) for the printed table.
    from hybridprof.analysis.layer_table import layer_table
    from hybridprof.reporting import renderer_for

    html, txt = renderer_for("x.html"), renderer_for("x.txt")
    html.render(chain_session(3))  # type: ignore[arg-type]  # templates loaded before timing
    steps: dict[str, Callable[[object], object]] = {
        "layer_table": layer_table,  # type: ignore[dict-item]
        "terminal": str,
        "txt": txt.render,  # type: ignore[dict-item]
        "html": html.render,  # type: ignore[dict-item]
    }
    # Each step on a session of its own: a session's layer table is built once and then shared,
    # and each step's time is meant to hold its table's building.
    return {name: cpu_seconds(step, chain_session(depth)) for name, step in steps.items()}


def child(depth: int, baseline: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    paths = [str(baseline)] if baseline else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(depth)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=baseline or ROOT,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", type=int, nargs="+", default=[125, 250, 500])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    versions = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    times: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for depth in args.depths:
            for name, folder in versions.items():  # interleaved: the load hits both alike
                times.setdefault((name, depth), []).append(child(depth, folder))
    print(f"load {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); median CPU s of {args.rounds}")
    for name in versions:
        for depth in args.depths:
            row = {s: statistics.median(t[s] for t in times[(name, depth)]) for s in STEPS}
            print(f"{name:8} depth {depth:5}: " + "  ".join(f"{s} {row[s]:.3f}" for s in STEPS))
        for small, big in zip(args.depths, args.depths[1:], strict=False):
            growth = {
                s: statistics.median(t[s] for t in times[(name, big)])
                / max(statistics.median(t[s] for t in times[(name, small)]), 1e-9)
                for s in STEPS
            }
            print(f"{name:8} {small}->{big}: " + "  ".join(f"{s} x{growth[s]:.1f}" for s in STEPS))
    if args.baseline:
        for depth in args.depths:
            ratios = {
                s: statistics.median(
                    a[s] / max(b[s], 1e-9)
                    for a, b in zip(times[("this", depth)], times[("baseline", depth)], strict=True)
                )
                for s in STEPS
            }
            print(
                f"this/baseline depth {depth}: " + "  ".join(f"{s} {ratios[s]:.2f}" for s in STEPS)
            )


if __name__ == "__main__":
    main()
