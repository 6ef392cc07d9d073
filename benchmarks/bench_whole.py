"""What a user waits for, whole: `with Profile` on the 400-leaf MLP, and `hybridprof run` at 10,000
leaves, each against a baseline measured in the same rounds.

    .venv/bin/python benchmarks/bench_whole.py              # full run (a few minutes)
    .venv/bin/python benchmarks/bench_whole.py --quick      # fewer rounds, same lines

1 torch thread throughout. Printed:

- whole cost, MLP (200 x Linear(256,256)+ReLU, input 32x256, the 400 leaves profiled): enter
  `with hybridprof.Profile(model)`, 3 warm-up + 20 forwards, exit, the first `str(prof)`, then
  `prof.session()`, as a ratio to the same 23 bare forwards timed just before it in the same
  round (median of the per-round ratios). Split into measuring (the forwards in the block less the
  bare ones) and post-processing (exit, `str`, `session()`), each per layer call. Beside it the
  floor: torch.profiler alone around the same forwards, stopped, and its events read once (name,
  start, end, thread of each), against the same bare forwards.
- per forward: the `session` strategy (and torch.profiler alone) on the MLP (its 400 leaves and the
  root) and on a tree of 10,000 `Linear(16,16)`/`ReLU` leaves (blocks of 10; 11,001 modules, all
  profiled, input 8x16), each forward timed right after a bare one (benchmarks/bench_overhead.py's
  method).
- `hybridprof run MODEL.py --iters 5 --threads 1 --out-dir DIR` on a model file of that
  10,000-leaf tree, in a fresh process, with the outputs a run writes by default (session.json,
  report.html): wall time, CPU time and peak RSS (median over repeats), and the peak RSS at 30
  iterations (memory should not grow with the iteration count). Beside it, torch's share of such a
  run (FLOOR_SCRIPT): the same model file, imports, warm-up and per iteration the profiler around
  the two forwards a measured iteration runs, its events read once; nothing else.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import itertools

from bench_overhead import Runner, build, leaf_paths

import hybridprof
from hybridprof.runtime.basics.quiet import quiet_fd2

WIDTH = 16
FORWARDS = 23  # 3 warm-up + 20, as the whole cost

MODEL_FILE = '''\
"""A tree of {leaves} leaves: blocks of 10 (5 x Linear(16,16)+ReLU)."""
import torch
from torch import nn


def build_model():
    blocks, left = [], {leaves}
    while left > 0:
        n = min(10, left)
        blocks.append(
            nn.Sequential(*[nn.Linear(16, 16) if i % 2 == 0 else nn.ReLU() for i in range(n)])
        )
        left -= n
    torch.manual_seed(0)
    return nn.Sequential(*blocks).eval(), (torch.randn(8, 16),)
'''


def tree(leaves: int) -> tuple[nn.Module, torch.Tensor]:
    """The model of MODEL_FILE, built in this process."""
    namespace: dict[str, Any] = {}
    exec(MODEL_FILE.format(leaves=leaves), namespace)
    model, (x,) = namespace["build_model"]()
    return model, x


def clock() -> float:
    return time.perf_counter()


# ---------------------------------------------------------------------------- whole cost


@dataclass(frozen=True, slots=True)
class WholeRound:
    bare: float  # 23 bare forwards
    enter: float
    forwards: float  # the 23 forwards inside the block
    exit: float
    first_str: float
    session: float
    floor: float  # torch.profiler alone: start, 23 forwards, stop, events read once

    @property
    def whole(self) -> float:
        return self.enter + self.forwards + self.exit + self.first_str + self.session

    @property
    def post(self) -> float:
        return self.exit + self.first_str + self.session


def read_once(prof: Any) -> int:
    """What reading the raw events once costs at least: four accessors per event."""
    events = prof.kineto_results.events()
    for e in events:
        e.name(), e.start_ns(), e.end_ns(), e.start_thread_id()
    return len(events)


def whole_round(model: nn.Module, x: torch.Tensor) -> WholeRound:
    with torch.no_grad():
        gc.collect()
        start = clock()
        for _ in range(FORWARDS):
            model(x)
        bare = clock() - start
        gc.collect()
        marks = [clock()]
        with quiet_fd2():
            prof = hybridprof.Profile(model)
            prof.__enter__()
            marks.append(clock())
            for _ in range(FORWARDS):
                model(x)
            marks.append(clock())
            prof.__exit__(None, None, None)
        marks.append(clock())
        str(prof)
        marks.append(clock())
        prof.session()
        marks.append(clock())
        del prof
        gc.collect()
        floor_start = clock()
        with quiet_fd2():
            raw = torch.autograd.profiler.profile()
            raw.__enter__()
        for _ in range(FORWARDS):
            model(x)
        with quiet_fd2():
            raw.__exit__(None, None, None)
        read_once(raw)
        floor = clock() - floor_start
        del raw
    steps = [b - a for a, b in itertools.pairwise(marks)]
    return WholeRound(bare, *steps, floor)


def whole_cost(rounds: int) -> list[str]:
    torch.manual_seed(0)
    model, x = build("mlp")
    calls = FORWARDS * len(hybridprof.Profile(model).plan.selected_paths())
    whole_round(model, x)  # warm-up: first profiler start, imports
    runs = [whole_round(model, x) for _ in range(rounds)]

    def med(value: Callable[[WholeRound], float]) -> float:
        return float(statistics.median(value(r) for r in runs))

    ratio = med(lambda r: r.whole / r.bare)
    measuring_us = med(lambda r: 1e6 * (r.enter + r.forwards - r.bare) / calls)
    post_us = med(lambda r: 1e6 * r.post / calls)
    return [
        f"whole cost, MLP 400 leaves, {calls} layer calls: {ratio:.2f}x the {FORWARDS} bare "
        f"forwards (target <= 1.5); torch.profiler alone, stopped and read once: "
        f"{med(lambda r: r.floor / r.bare):.2f}x",
        f"- whole cost / torch's floor, per round: {med(lambda r: r.whole / r.floor):.2f}x "
        "(target <= 1.10)",
        f"- per layer call: measuring {measuring_us:.1f} us, post-processing {post_us:.1f} us "
        "(target <= 5)",
        f"- medians: bare {med(lambda r: r.bare):.3f} s; enter {med(lambda r: r.enter):.4f} s; "
        f"forwards {med(lambda r: r.forwards):.3f} s; exit {med(lambda r: r.exit):.3f} s; "
        f"first str {med(lambda r: r.first_str):.3f} s; session() {med(lambda r: r.session):.3f} s",
    ]


# --------------------------------------------------------------------------- per forward


def per_forward(
    model: nn.Module, x: torch.Tensor, configs: tuple[str, ...], rounds: int, warmup: int
) -> dict[str, tuple[float, float]]:
    """Per config: (median ratio to the bare forward before it, median post-processing ms)."""
    paths = leaf_paths(model)
    runners = {name: Runner(name, model, x, paths) for name in ("bare", *configs)}
    ratios: dict[str, list[float]] = {name: [] for name in configs}
    try:
        for round_no in range(warmup + rounds):
            for name in configs:
                bare, measured = runners["bare"].forward(), runners[name].forward()
                if round_no >= warmup:
                    ratios[name].append(measured / bare)
    finally:
        for runner in runners.values():
            runner.close()
    return {
        name: (
            float(statistics.median(ratios[name])),
            1e3 * statistics.median(runners[name].post[warmup:] or [0.0]),  # type: ignore[index]
        )
        for name in configs
    }


def per_forward_lines(rounds: int, warmup: int, leaves: int) -> list[str]:
    lines = []
    targets = {"mlp": 1.10, "tree": 1.35}
    for label, (model, x) in (("mlp", build("mlp")), ("tree", tree(leaves))):
        result = per_forward(model, x, ("torch.profiler", "session"), rounds, warmup)
        name = "MLP 400 leaves" if label == "mlp" else f"tree of {leaves} leaves"
        session_ratio, session_post = result["session"]
        floor_ratio, floor_post = result["torch.profiler"]
        lines.append(
            f"per forward, {name}: session {session_ratio:.2f}x (target <= {targets[label]:.2f}), "
            f"post-processing {session_post:.1f} ms; torch.profiler alone {floor_ratio:.2f}x, "
            f"stopping it {floor_post:.1f} ms"
        )
        del model, x
        gc.collect()
    return lines


# ------------------------------------------------------------------------ hybridprof run


@dataclass(frozen=True, slots=True)
class RunCost:
    wall_s: float
    cpu_s: float
    rss_mb: float


# What any run of that shape costs in torch alone, in a fresh process: import torch, build the
# model, 3 bare warm-up forwards, then per iteration the profiler started, the two forwards a
# measured iteration runs (the unmeasured warm step and the measured one), the profiler stopped
# and its events read once (four accessors each). No layer ranges, nothing worked out or saved.
FLOOR_SCRIPT = """
import sys, torch
torch.set_num_threads(1)
namespace = {}
exec(open(sys.argv[1]).read(), namespace)
model, (x,) = namespace["build_model"]()
with torch.no_grad():
    for _ in range(3):
        model(x)
    for _ in range(int(sys.argv[2])):
        prof = torch.autograd.profiler.profile()
        with prof:
            model(x)
            model(x)
        for e in prof.kineto_results.events():
            e.name(), e.start_ns(), e.end_ns(), e.start_thread_id()
        del prof
"""


def run_once(model_file: Path, iters: int) -> RunCost:
    """`hybridprof run` in a fresh process, writing what it writes by default (session.json and
    report.html) into a scratch --out-dir; its own wall, CPU and peak RSS (os.wait4)."""
    out = model_file.parent / "out"
    cmd = [sys.executable, "-m", "hybridprof", "run", str(model_file), "--iters", str(iters)]
    cmd += ["--threads", "1", "--out-dir", str(out)]
    return measured_process(cmd)


def floor_once(model_file: Path, iters: int) -> RunCost:
    """FLOOR_SCRIPT in a fresh process: torch's share of such a run."""
    return measured_process([sys.executable, "-c", FLOOR_SCRIPT, str(model_file), str(iters)])


def measured_process(cmd: list[str]) -> RunCost:
    """Run `cmd` to its end; its wall, CPU and peak RSS (os.wait4)."""
    start = clock()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = clock() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.stderr is not None
    error = child.stderr.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"{cmd[1:3]} failed (exit {child.returncode}): {error}")
    return RunCost(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def run_lines(leaves: int, repeats: int) -> list[str]:
    lines = []
    run_wall = 0.0
    with tempfile.TemporaryDirectory(prefix="hybridprof-bench-whole-") as tmp:
        model_file = Path(tmp) / f"tree{leaves}.py"
        model_file.write_text(MODEL_FILE.format(leaves=leaves), encoding="utf-8")
        for iters in (5, 30):
            costs = [run_once(model_file, iters) for _ in range(repeats if iters == 5 else 1)]
            wall = statistics.median(c.wall_s for c in costs)
            cpu = statistics.median(c.cpu_s for c in costs)
            rss = statistics.median(c.rss_mb for c in costs)
            target = " (targets <= 6 s, <= 500 MB)" if iters == 5 else ""
            if iters == 5:
                run_wall = wall
            lines.append(
                f"`hybridprof run tree{leaves}.py --iters {iters} --threads 1 --out-dir DIR` "
                f"(session + HTML report): wall {wall:.2f} s, "
                f"CPU {cpu:.2f} s, peak RSS {rss:.0f} MB{target}"
            )
            print(lines[-1], flush=True)
        floor = [floor_once(model_file, 5) for _ in range(repeats)]
        floor_wall = statistics.median(c.wall_s for c in floor)
        lines.append(
            "torch alone for the same 5 iterations (import, model, 3 warm-up forwards, per "
            "iteration profiler start + 2 forwards + stop + events read once): wall "
            f"{floor_wall:.2f} s, peak RSS "
            f"{statistics.median(c.rss_mb for c in floor):.0f} MB; the run (--iters 5) "
            f"{run_wall / floor_wall:.2f}x it (target <= 1.3)"
        )
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds (same lines)")
    parser.add_argument("--leaves", type=int, default=10_000, help="leaves of the tree (10000)")
    parser.add_argument(
        "--only", choices=("whole", "forward", "run"), help="print one part (default: all)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    whole_rounds, rounds, warmup, repeats = (5, 10, 2, 1) if args.quick else (11, 30, 5, 3)
    lines = [
        f"torch {torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    ]
    print(lines[0], flush=True)
    if args.only in (None, "whole"):
        lines += whole_cost(whole_rounds)
        print("\n".join(lines[-4:]), flush=True)
    if args.only in (None, "forward"):
        lines += per_forward_lines(rounds, warmup, args.leaves)
        print("\n".join(lines[-2:]), flush=True)
    if args.only in (None, "run"):
        lines += run_lines(args.leaves, repeats)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
