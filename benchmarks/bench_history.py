"""`hybridprof history add` and `show` on a history of 10,000 sessions of 1,000 layers.

    .venv/bin/python benchmarks/bench_history.py [--sessions 10000] [--layers 1000] [--rounds 5]
        [--db PATH] [--baseline CHECKOUT]

The history is built here (no torch work): `--sessions` - 1 sessions, one per commit, their
layers' self times with noise and two steps, added through the store as `history add` adds them
(10 million rows, 450 MB, 4-5 minutes at the defaults; `--db PATH` keeps the file for the next
run, which then reuses it). Then each round, interleaved, times:

- add: a real session file of `--layers` layers (20 iterations, per-iteration values) read,
  snapshotted and added in this process, and the whole `history add` command in a new process
  (Python's start and imports included);
- show: `history show` of the default window (the last 100 commits) in a new process, and its
  parts in this one (reading the window, finding the change points, the lines printed); and
  `history show --last 1000` in a new process, to see how it grows with the window;
- baselines: a new process that does nothing, and one that only imports ruptures (1 s of
  show's time: ruptures imports scipy.stats, scipy.spatial and scipy.signal up front).

With `--baseline CHECKOUT` (another checkout of hybridprof, e.g. a git worktree of main), the
add in a process is also timed in two long-lived worker processes, one importing this checkout's
code and one the other's, each round both in turn (which goes first alternates): the two codes'
times side by side in one run, on one machine load.

Medians over the rounds are printed with the load average. On a shared machine wall time grows
with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
COMMAND = "import sys; from hybridprof.cli.history import main; sys.exit(main(sys.argv[1:]))"
# A worker: per line "FILE<tab>DB<tab>REV" read, `history add FILE --db DB --commit REV` run in
# the worker's process (as `add_here`), its seconds printed.
WORKER = """
import contextlib, io, sys, time
from hybridprof.cli.history.history_add import main
for line in sys.stdin:
    file, db, rev = line.rstrip("\\n").split("\\t")
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = main([file, "--db", db, "--commit", rev])
    seconds = time.perf_counter() - start
    assert code == 0 and printed.getvalue().startswith("added "), printed.getvalue()
    print(seconds, flush=True)
"""


def build(db: Path, sessions: int, layers: int) -> None:
    from hybridprof.history.fingerprint import Machine
    from hybridprof.history.snapshot import LayerFigures, Snapshot
    from hybridprof.history.store import CommitRef, open_store

    # The session files' machine, model, paths and levels (bench_diff.make_session's), so the
    # sessions added in the rounds continue the series.
    machine = Machine("bench CPU", "cpu", "2.13.0+cpu", 1)
    rng = np.random.default_rng(0)
    level = 50.0 + (np.arange(layers) % 37) * 10.0
    paths = [f"blocks.{i // 2}.{'fc' if i % 2 == 0 else 'act'}" for i in range(layers)]
    start = time.perf_counter()
    with open_store(db, create=True) as store:
        for c in range(sessions):
            values = level * (1 + 0.02 * rng.standard_normal(layers))
            values[7] *= 1.3 if c >= sessions - 40 else 1.0  # a layer's step 40 commits ago
            values[8:] *= 1.1 if sessions - 70 <= c < sessions - 5 else 1.0  # a busy runner
            figures = tuple(
                LayerFigures(p, "Linear" if i % 2 == 0 else "ReLU", float(v), share_pct=0.1)
                for i, (p, v) in enumerate(zip(paths, values, strict=True))
            )
            snap = Snapshot(
                f"bench-{c}", "Net", None, machine, "", 20, None, "cpu", "stable",
                figures,
            )  # fmt: skip
            store.add(snap, CommitRef(f"{c:040x}", "", 1_600_000_000 + 60 * c, f"commit {c}"))
            if c % 1000 == 999:
                print(
                    f"  built {c + 1:,} sessions in {time.perf_counter() - start:.0f} s", flush=True
                )


def session_file(folder: Path, layers: int, seed: int) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_diff import make_session

    path = folder / f"session-{seed}.json"
    session = make_session(layers, 20, seed, changed=False)
    from dataclasses import replace

    started = f"{time.time():.6f}-{seed}"  # a run of its own, each time: never added before
    path.write_text(replace(session, started_at=started).to_json())
    return path


def add_here(db: Path, file: Path, rev: str) -> float:
    """`history add FILE --db DB --commit REV` run in this process: the command's own work
    (reading, snapshot, store, its one output line) without Python's start and imports."""
    from hybridprof.cli.history.history_add import main

    start = time.perf_counter()
    # outside a git checkout (the system's temp folder), where --commit takes any label
    with (
        contextlib.chdir(tempfile.gettempdir()),
        contextlib.redirect_stdout(io.StringIO()) as printed,
    ):
        code = main([str(file), "--db", str(db.resolve()), "--commit", rev])
    assert code == 0 and printed.getvalue().startswith("added "), printed.getvalue()
    return time.perf_counter() - start


def in_new_process(*argv: str, code: str = COMMAND) -> float:
    """Wall seconds of a `hybridprof history` command (or `code`) in a new process (in the
    system's temp folder: outside a git checkout, where --commit takes any label)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - start


class AddWorker:
    """A process that imported the hybridprof of `root` once and adds session files on request
    (in the system's temp folder, as `add_here`)."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(root)},
        )

    def add(self, db: Path, file: Path, rev: str) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{file}\t{db.resolve()}\t{rev}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the add worker stopped (exit code {self.process.wait()})"
        return float(answer)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def show_parts(db: Path) -> tuple[float, float, float]:
    from hybridprof.history.overview import overview
    from hybridprof.history.series import read_window
    from hybridprof.history.store import open_store
    from hybridprof.reporting.history.history_text import render_history_text

    t0 = time.perf_counter()
    with open_store(db) as store:
        series = store.all_series()[0]
        window = read_window(store, series)
    t1 = time.perf_counter()
    view = overview(str(db), window)
    t2 = time.perf_counter()
    render_history_text(view)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--layers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT")
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "hybridprof" / "__init__.py").is_file():
        sys.exit(f"--baseline {args.baseline}: no hybridprof checkout there; give its root folder")
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)")
    with tempfile.TemporaryDirectory() as folder:
        db = args.db or Path(folder) / "history.sqlite"
        if not db.exists():
            print(f"building {args.sessions - 1:,} sessions x {args.layers:,} layers in {db}")
            build(db, args.sessions - 1, args.layers)
        print(f"history file: {db.stat().st_size / 1e6:,.0f} MB")
        run_rounds(db, Path(folder), args)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def run_rounds(db: Path, folder: Path, args: argparse.Namespace) -> None:
    from hybridprof.history.store import open_store

    times: dict[str, list[float]] = {}
    workers = {}
    if args.baseline is not None:
        workers = {
            "add, in a worker: this checkout": AddWorker(ROOT),
            f"add, in a worker: {args.baseline}": AddWorker(args.baseline.resolve()),
        }
    with open_store(db) as store:  # warm-up: the file's pages into the OS cache
        store.sessions_of(store.all_series()[0])
    in_new_process("show", "--db", str(db))
    stamp = f"{time.time():.0f}"  # commits of this run's own: a commit measured again pools
    for r in range(args.rounds):
        files = [session_file(folder, args.layers, 10 + 2 * r + k) for k in (0, 1)]
        samples = {
            "add, in this process": add_here(db, files[0], f"add-{stamp}-{r}"),
            "history add, a new process": in_new_process(
                "add", str(files[1]), "--db", str(db), "--commit", f"cli-{stamp}-{r}"
            ),
            "history show (100 commits), a new process": in_new_process("show", "--db", str(db)),
            "history show --last 1000, a new process": in_new_process(
                "show", "--db", str(db), "--last", "1000"
            ),
        }
        samples["baseline: a new process that imports ruptures"] = in_new_process(
            code="import ruptures"
        )
        samples["baseline: a new process that does nothing"] = in_new_process(code="pass")
        read, detect, lines = show_parts(db)
        samples |= {"  show: read the window": read, "  show: change points": detect}
        samples["  show: the lines"] = lines
        order = list(workers.items())[:: 1 if r % 2 == 0 else -1]
        for k, (name, worker) in enumerate(order):
            file = session_file(folder, args.layers, 1000 + 2 * r + k)
            samples[name] = worker.add(db, file, f"worker-{stamp}-{r}-{k}")
        for name, seconds in samples.items():
            times.setdefault(name, []).append(seconds)
    for worker in workers.values():
        worker.close()
    print(f"{args.rounds} rounds, medians (ms):")
    for name, values in times.items():
        print(f"  {name:<46} {1e3 * statistics.median(values):8.1f}")


if __name__ == "__main__":
    main()
