"""Saved-session size, write and load time, and `hybridprof report` to JSON and text, at scale.

    .venv/bin/python benchmarks/bench_session_size.py [--leaves 10000] [--iters 5] [--rounds 5] \
        [--baseline DIR]

A model of `--leaves` small leaves (blocks of Linear+ReLU, as bench_reports.py) is profiled
for real by `hybridprof.profile` (1 thread, 1 warm-up) for each iteration count. The session is
then handed (pickled) to a fresh process per round, which times: writing the session file
(`to_json` and the write), loading it (`hybridprof.load_session`), and `hybridprof report
FILE -o x.json` and `-o x.txt` (each loads the file again). Wall and CPU seconds are printed; CPU
time is the steadier one on a shared machine.

`--baseline DIR`: a checkout of another hybridprof version (e.g. `git worktree add /tmp/base main`,
or `git archive main | tar -x -C /tmp/base`); its rounds run with DIR first on `PYTHONPATH`,
interleaved with this checkout's, and each figure's median ratio (this / baseline) over the rounds
is printed too. The session's classes must pickle across both (same field names).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # quiet profiler start/stop lines (before torch)

WIDTH = 16  # as bench_reports.make_model
STEPS = ("write", "load", "report_json", "report_txt")


def make_model(leaves: int) -> Any:
    """bench_reports.py's tree of `leaves` leaves (blocks of 10: 5 x Linear(16,16)+ReLU), imported
    only here: the child rounds that time loading must not import torch."""
    from bench_reports import make_model as tree  # benchmarks/ is on sys.path (run as a script)

    return tree(leaves)


# --------------------------------------------------------------------------- one round (a child)


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of `fn()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure_round(pickled: Path, folder: Path) -> dict[str, object]:
    """Write, load and report the pickled session with the hybridprof this process imports."""
    import hybridprof
    from hybridprof.cli.report import main as report
    from hybridprof.datamodel import SCHEMA_VERSION
    from hybridprof.files.storage import load_session

    session = pickle.loads(pickled.read_bytes())
    # written as the schema this version writes
    plan = replace(session.plan, schema_version=SCHEMA_VERSION)
    session = replace(session, plan=plan, schema_version=SCHEMA_VERSION)
    file = folder / "session.json"
    out: dict[str, object] = {"version": hybridprof.__file__}
    out["write"] = timed(lambda: file.write_text(session.to_json(), encoding="utf-8"))
    out["bytes"] = file.stat().st_size
    out["load"] = timed(lambda: load_session(file))
    for step, suffix in (("report_json", ".json"), ("report_txt", ".txt")):
        target = folder / f"report{suffix}"
        argv = [str(file), "-o", str(target), "--force"]
        out[step] = timed(lambda argv=argv: report(argv))
    return out


# --------------------------------------------------------------------------- the benchmark


def profiled(leaves: int, iters: int) -> tuple[Any, float]:
    import torch

    import hybridprof

    torch.set_num_threads(1)
    model = make_model(leaves)
    x = torch.randn(8, WIDTH)
    start = time.perf_counter()
    session = hybridprof.profile(model, x, warmup=1, iters=iters)
    return session, time.perf_counter() - start


def run_child(pickled: Path, path_first: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if path_first:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path_first, env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, __file__, "--measure", str(pickled), "--folder", folder],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def report_sizes(session: Any, runs: float) -> None:
    full = len(session.to_json().encode())
    records = session.records
    bare = replace(session, records=tuple(replace(r, per_iteration=None) for r in records))
    bare_size = len(bare.to_json().encode())
    print(
        f"{len(records)} records; session {full / 1e6:.2f} MB, of which per-iteration series "
        f"{(full - bare_size) / 1e6:.2f} MB ({100 * (full - bare_size) / full:.1f}%); "
        f"profiled in {runs:.1f} s"
    )


def compare(pickled: Path, rounds: int, baseline: str | None) -> None:
    sides = {"this": None} if baseline is None else {"baseline": baseline, "this": None}
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(rounds):  # interleaved: each round runs every side once
        for side, path_first in sides.items():
            results[side].append(run_child(pickled, path_first))
    for side, rows in results.items():
        print(f"{side}: {rows[0]['version']}, file {rows[0]['bytes'] / 1e6:.2f} MB")
    print(
        f"medians of {rounds} rounds, seconds wall / CPU"
        + (" (ratio this/baseline)" * bool(baseline))
    )
    for step in STEPS:
        cells = []
        for side, rows in results.items():
            wall = statistics.median(float(r[step][0]) for r in rows)
            cpu = statistics.median(float(r[step][1]) for r in rows)
            cells.append(f"{side} {wall:6.2f} / {cpu:5.2f}")
        if baseline:
            ratio = statistics.median(
                float(t[step][1]) / float(b[step][1])
                for b, t in zip(results["baseline"], results["this"], strict=True)
            )
            cells.append(f"CPU ratio {ratio:.2f}")
        print(f"  {step:12s} " + " | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--iters", type=int, nargs="+", default=[5])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="a checkout of hybridprof to compare with")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one round, in a child
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_round(args.measure, args.folder)))
        return
    print(f"{args.leaves} leaves, 1 thread, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        for iters in args.iters:
            session, seconds = profiled(args.leaves, iters)
            print(f"--- {iters} iterations")
            report_sizes(session, seconds)
            pickled = Path(folder) / f"session-{iters}.pickle"
            pickled.write_bytes(pickle.dumps(session))
            del session
            compare(pickled, args.rounds, args.baseline)


if __name__ == "__main__":
    main()
