"""Quiet against busy: `hybridprof run MODEL --iters 20` at default options, first alone, then with
two busy processes (`while True: pass`) on the same two cores, for a tiny GPT, a small residual
CNN and the README's net.py, written fresh into a temporary folder.

Prints, per model: the headline (the rows' sum, what every view states) busy/quiet, the median
iteration as measured busy/quiet, the per-layer self times' median
deviation (layers above 2% of the time), the largest share move in points, what the rows add up
to against the headline in each run, the largest busy/quiet ratio of a layer, whether any
interval was printed as ±N% over 100, whether the table marked figures inflated, and the waits
the busy run excluded. The load (/proc/loadavg) before each run is printed beside it.

    .venv/bin/python benchmarks/bench_busy_machine.py [--iters 20] [--busy 2]
    .venv/bin/python benchmarks/bench_busy_machine.py --cost   # what reading the waits costs
    .venv/bin/python benchmarks/bench_busy_machine.py --bare   # the layers' own code, unprofiled

`--cost` times a forward of the 400-leaf MLP (32x256, one thread) alone and with the two reads of
the thread's wait a measured iteration makes, interleaved, and prints the median per-round ratio;
then hybridprof's default profiled forward of the 400-leaf MLP of benchmarks/README.md (200 x
Linear+ReLU) as it is and with time.thread_time_ns() read at both boundaries of every layer call
(what per-layer waits need), interleaved, beside an A/A control.

`--bare` asks what the load does to the layers' own code, without any profiler: each leaf layer
called alone on the inputs it got in the model's forward, in the forward's order, 20 iterations
(after 3), perf_counter and time.thread_time_ns around each call, one thread, quiet then busy;
its per-layer median deviation and largest share move (the same statistics as above), in wall
time and in the thread's CPU time, beside hybridprof's, measured in the same quiet and busy
periods; with the thread's run-queue wait (schedstat) and the host's steal (/proc/stat) over each
bare run. What the bare code moves by is the floor no profiler can go below: wall time that moves
while CPU time holds is waiting (which per-layer waits could take out); CPU time that moves is
the code running slower on a shared core (cache, frequency, the host), which nothing can.
`--pinned`: the bare code on CPU 0, the busy processes on the others: no scheduler wait at all,
only the shared hardware. `--models` picks models, `--repeat N` measures each N times (an
outlier seen once: again).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridprof.analysis.layer_table import layer_table
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session

GPT = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, d=96, blocks=4, heads=4, context=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(blocks))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def build_model():
    return TinyGPT().eval()


def example_inputs():
    return (torch.randint(0, 256, (4, 64)),)
"""

CNN = """
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.relu(x + self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.stage1 = nn.Sequential(Residual(32), Residual(32))
        self.down = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.stage2 = nn.Sequential(Residual(64), Residual(64))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.fc(self.pool(x).flatten(1))


def build_model():
    return SmallResNet().eval()


def example_inputs():
    return (torch.rand(2, 3, 32, 32),)
"""

NET = """
import torch
from torch import nn


def build_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def example_inputs():
    return (torch.rand(32, 64),)
"""

MODELS = {"tiny_gpt.py": GPT, "small_resnet.py": CNN, "net.py": NET}
OVER_100 = re.compile(r"±\s*(\d{3,}(?:\.\d+)?)%")
BUSY = "while True: pass"

# One process timing each leaf layer's call alone (argv: model file, iterations): a JSON object
# with, per leaf path, the median wall microseconds per iteration ("wall") and the median thread
# CPU microseconds (time.thread_time_ns around the same calls: "cpu"), and the thread's
# run-queue wait over the timed iterations (schedstat's second field, "wait_us"). Wall minus CPU
# is the time the thread was not running; CPU time that moves is the code itself running slower.
BARE = r"""
import importlib.util, json, statistics, sys, time
import torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("bare_model", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model, inputs = module.build_model(), module.example_inputs()
leaves = {m: name for name, m in model.named_modules() if not any(m.children())}
calls = []
hooks = [m.register_forward_pre_hook(lambda m, args: calls.append((m, args))) for m in leaves]
with torch.no_grad():
    model(*inputs)
for hook in hooks:
    hook.remove()
def waited():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e3
walls, cpus = {}, {}
with torch.no_grad():
    for iteration in range(3 + int(sys.argv[2])):
        if iteration == 3:
            wait_before = waited()
        wall, cpu = dict.fromkeys(leaves.values(), 0.0), dict.fromkeys(leaves.values(), 0.0)
        for layer, args in calls:
            start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            layer(*args)
            end_cpu, end = time.thread_time_ns(), time.perf_counter_ns()
            wall[leaves[layer]] += (end - start) / 1e3
            cpu[leaves[layer]] += (end_cpu - start_cpu) / 1e3
        if iteration >= 3:
            for path in wall:
                walls.setdefault(path, []).append(wall[path])
                cpus.setdefault(path, []).append(cpu[path])
print(json.dumps({
    "wall": {path: statistics.median(us) for path, us in walls.items()},
    "cpu": {path: statistics.median(us) for path, us in cpus.items()},
    "wait_us": waited() - wait_before,
}))
"""


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    """A subprocess's preexec: run on `cpus` only (None: wherever the scheduler likes)."""
    return None if cpus is None else lambda: os.sched_setaffinity(0, cpus)


@contextmanager
def busy(count: int, cpus: set[int] | None = None) -> Iterator[None]:
    loops = [
        subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=pinned(cpus))
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def profiled(model: Path, out: Path, iters: int) -> tuple[ProfileSession, str]:
    command = [sys.executable, "-m", "hybridprof", "run", str(model), "--iters", str(iters)]
    done = subprocess.run(
        [*command, "-o", str(out)], capture_output=True, text=True, check=True, timeout=900
    )
    return load_session(out), done.stdout


def self_times(session: ProfileSession) -> dict[str, float]:
    return {r.path: r.self_cpu_us.median for r in session.records}


def rows_sum(session: ProfileSession) -> float:
    """Every row's own figure as the table shows it (self medians, the outside row's)."""
    return sum(r.own_us for r in layer_table(session).rows)


def headline(session: ProfileSession) -> float:
    """The iteration every view states (the layer table's: the rows' sum)."""
    return layer_table(session).iteration_us


def measured(session: ProfileSession) -> float:
    """The median iteration as measured (a pause in every iteration stays in it)."""
    return statistics.median(session.iteration_cpu_us)


def compare(name: str, quiet: ProfileSession, loaded: ProfileSession, printed: str) -> None:
    q, b = self_times(quiet), self_times(loaded)
    q_sum, b_sum = rows_sum(quiet), rows_sum(loaded)
    heavy = [p for p, us in q.items() if us > 0.02 * q_sum and b.get(p)]
    deviation = statistics.median(abs(b[p] / q[p] - 1) for p in heavy) if heavy else 0.0
    shares = max(abs(100 * b.get(p, 0.0) / b_sum - 100 * us / q_sum) for p, us in q.items())
    worst = max((b[p] / us for p, us in q.items() if us > 0 and p in b), default=0.0)
    waits = loaded.cpu_waits
    excluded = f"{waits.excluded} excluded, {waits.kept_over} kept over" if waits else "no waits"
    print(
        f"{name}: headline {headline(loaded) / headline(quiet):.2f}x (median iteration as "
        f"measured {measured(loaded) / measured(quiet):.2f}x); layers off by "
        f"{100 * deviation:.0f}% (median of {len(heavy)}); shares within {shares:.1f} pp; rows/"
        f"headline {q_sum / headline(quiet):.3f} quiet, {b_sum / headline(loaded):.3f} busy; "
        f"worst layer {worst:.2f}x; ±N%>100 printed: {bool(OVER_100.search(printed))}; "
        f"inflated marked: {'(inflated)' in printed}; busy run: {excluded}"
    )


@dataclass(frozen=True)
class Bare:
    """One bare run: per leaf, median wall and thread CPU us per iteration; what it waited."""

    wall: dict[str, float]
    cpu: dict[str, float]
    wait_us: float  # the thread's run-queue wait over the timed iterations (schedstat)
    steal: float  # the host's steal over the run: a share of all the machine's CPU time


def cpu_ticks() -> tuple[int, int]:
    """/proc/stat's all-CPU line: (steal, total) ticks. Steal is the time the hypervisor ran
    something else on a vCPU that wanted to run: the guest's scheduler never sees it."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return fields[7], sum(fields)  # user nice system idle iowait irq softirq steal


def bare_times(model: Path, iters: int, cpus: set[int] | None = None) -> Bare:
    steal_before, total_before = cpu_ticks()
    done = subprocess.run(
        [sys.executable, "-c", BARE, str(model), str(iters)],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
        preexec_fn=pinned(cpus),
    )
    steal_after, total_after = cpu_ticks()
    got = json.loads(done.stdout)
    steal = (steal_after - steal_before) / max(1, total_after - total_before)
    return Bare(dict(got["wall"]), dict(got["cpu"]), float(got["wait_us"]), steal)


def drift(quiet: dict[str, float], loaded: dict[str, float], paths: list[str]) -> str:
    """Busy against quiet over `paths`: the median deviation and the largest share move (and
    whose it is: an outlier is then a layer one can look at)."""
    q_sum, b_sum = sum(quiet[p] for p in paths), sum(loaded[p] for p in paths)
    heavy = [p for p in paths if quiet[p] > 0.02 * q_sum]
    off = statistics.median(abs(loaded[p] / quiet[p] - 1) for p in heavy)
    moves = {p: abs(100 * loaded[p] / b_sum - 100 * quiet[p] / q_sum) for p in paths}
    worst = max(moves, key=moves.__getitem__)
    return (
        f"layers off by {100 * off:.0f}% (median of {len(heavy)}), shares within "
        f"{moves[worst]:.1f} pp ({worst} {quiet[worst]:.0f} -> {loaded[worst]:.0f} us)"
    )


def bare_line(quiet: Bare, loaded: Bare, iters: int) -> str:
    """The bare code's wall and CPU time, busy against quiet, and what it lost to whom."""
    paths = sorted(quiet.wall)
    wall_q, wall_b = sum(quiet.wall.values()), sum(loaded.wall.values())
    cpu_q, cpu_b = sum(quiet.cpu.values()), sum(loaded.cpu.values())
    return (
        f"bare wall {wall_q:.0f} -> {wall_b:.0f} us ({wall_b / wall_q:.2f}x), "
        f"{drift(quiet.wall, loaded.wall, paths)}; bare thread CPU {cpu_q:.0f} -> {cpu_b:.0f} "
        f"us ({cpu_b / cpu_q:.2f}x), {drift(quiet.cpu, loaded.cpu, paths)}; run-queue wait "
        f"{quiet.wait_us / iters:.0f} -> {loaded.wait_us / iters:.0f} us per iteration; "
        f"steal {100 * quiet.steal:.2f}% quiet, {100 * loaded.steal:.2f}% busy"
    )


def bare_against_profiled(root: Path, iters: int, count: int, models: list[str]) -> None:
    """Per model: the bare leaves and hybridprof's leaf rows, quiet, then beside busy processes."""
    for file in models:
        model = root / file
        model.write_text(MODELS[file])
        before = loadavg()
        bare_quiet = bare_times(model, iters)
        quiet, _ = profiled(model, root / f"{file}.quiet.json", iters)
        with busy(count):
            bare_busy = bare_times(model, iters)
            loaded, _ = profiled(model, root / f"{file}.busy.json", iters)
            during = loadavg()
        paths = sorted(bare_quiet.wall)  # the leaves: a leaf's self time is its whole call
        rows_quiet, rows_busy = self_times(quiet), self_times(loaded)
        print(
            f"[load {before} quiet, {during} busy] {file}: "
            f"{bare_line(bare_quiet, bare_busy, iters)}; hybridprof's leaf rows "
            f"{drift(rows_quiet, rows_busy, paths)}",
            flush=True,
        )


def wait_cost(rounds: int = 30) -> None:
    """The forward with the two wait reads of a measured iteration, against the forward alone."""
    import torch
    from torch import nn

    from hybridprof.runtime.basics.cpu_wait import WaitClock

    torch.set_num_threads(1)
    mlp = nn.Sequential(*[nn.Linear(256, 256) for _ in range(400)]).eval()
    x, clock = torch.rand(32, 256), WaitClock()

    def forward(reads: bool) -> float:
        start = time.perf_counter()
        before = clock.read() if reads else None
        with torch.no_grad():
            mlp(x)
        after = clock.read() if reads else None
        del before, after
        return time.perf_counter() - start

    for _ in range(3):
        forward(False)
    ratios = [forward(True) / forward(False) for _ in range(rounds)]
    bare = statistics.median(forward(False) for _ in range(5)) * 1e3
    print(
        f"[load {loadavg()}] 400-leaf MLP forward {bare:.1f} ms; with the wait reads: "
        f"{statistics.median(ratios):.4f}x (median of {rounds} rounds); one read "
        f"{_read_us(clock.read):.2f} us"
    )


def mlp_400() -> tuple[Any, Any]:
    """The 400-leaf MLP of benchmarks/README.md (200 x Linear(256, 256) + ReLU, 32x256)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(200):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers).eval(), torch.randn(32, 256)


def bare_pinned(root: Path, iters: int, count: int, models: list[str]) -> None:
    """The bare code on CPU 0 alone, then with the busy processes on the other CPUs only: it
    never waits for its core, so whatever its CPU time moves by is the hardware it shares (the
    caches, the memory bus, the host's other work), not the scheduler."""
    others = set(range(1, os.cpu_count() or 1)) or {0}
    for file in models:
        model = root / file
        model.write_text(MODELS[file])
        before = loadavg()
        quiet = bare_times(model, iters, {0})
        with busy(count, others):
            loaded = bare_times(model, iters, {0})
            during = loadavg()
        print(
            f"[load {before} quiet, {during} busy; pinned: bare on CPU 0, {count} busy on "
            f"{sorted(others)}] {file}: {bare_line(quiet, loaded, iters)}",
            flush=True,
        )


class ProfiledForward:
    """hybridprof's default strategy (session, one range per layer call) around the 400-leaf
    MLP's forward; `reading` is its call with the thread's CPU time read at both boundaries."""

    def __init__(self) -> None:
        import torch

        from hybridprof.planner.compat import probe
        from hybridprof.planner.module_tree import tree_plan
        from hybridprof.runtime.strategies import make_strategy
        from hybridprof.runtime.strategies.base import StrategyConfig

        torch.set_num_threads(1)
        self.model, self.x = mlp_400()
        self.paths = tree_plan(self.model, None, (), None).selected_paths()
        self.strategy = make_strategy("session", StrategyConfig(paths=self.paths, compat=probe()))
        self.readings: list[int] = []
        self.clock: Callable[[], int] = time.thread_time_ns  # what `reading` reads
        self.plain = self.strategy.call
        self._quietly(self.strategy.begin)

    def reading(self, path: str, forward: Any, args: Any, kwargs: Any) -> Any:
        """The strategy's call (no memory profiling: the default) with the two reads inlined,
        as a per-range wait would be built: no extra frame, two reads and two appends."""
        strategy, read = self.strategy, self.clock
        self.readings.append(read())
        with strategy._make_range(strategy._range_names[path]):  # type: ignore[attr-defined]
            result = forward(*args, **kwargs)
        self.readings.append(read())
        return result

    def seconds(self, call: Any) -> float:
        """One profiled forward through `call`, timed (the profiler's start and stop outside)."""
        import torch

        from hybridprof.runtime.basics.patching import ForwardPatcher

        patcher = ForwardPatcher(self.model, self.paths, call)
        patcher.patch()
        try:
            self._quietly(self.strategy.begin_iteration)
            start = time.perf_counter()
            with torch.no_grad():
                self.model(self.x)
            seconds = time.perf_counter() - start
            self._quietly(self.strategy.end_iteration)
        finally:
            patcher.restore()
        self.readings.clear()
        return seconds

    def close(self) -> None:
        self._quietly(self.strategy.end)

    @staticmethod
    def _quietly(work: Callable[[], object]) -> None:
        from hybridprof.runtime.basics.quiet import quiet_fd2

        with quiet_fd2():
            work()


def range_read_cost(rounds: int = 30) -> None:
    """The profiled forward with and without the per-range CPU time reads, interleaved (the
    order alternates, so a drift of the machine cancels), beside an A/A control."""
    runner = ProfiledForward()
    plain, reading = runner.plain, runner.reading
    for _ in range(3):
        runner.seconds(plain), runner.seconds(reading)
    with_reads = interleaved(runner, rounds)
    runner.clock = time.perf_counter_ns  # the same bookkeeping with a clock read in user space
    bookkeeping = interleaved(runner, rounds)
    runner.clock = time.thread_time_ns
    control = [runner.seconds(plain) / runner.seconds(plain) for _ in range(rounds)]
    forwards = [runner.seconds(plain) for _ in range(5)]
    runner.close()
    print(
        f"[load {loadavg()}] 400-leaf MLP, hybridprof's default forward "
        f"{statistics.median(forwards) * 1e3:.1f} ms; with thread CPU time read at both "
        f"boundaries of every layer call: {statistics.median(with_reads):.4f}x (with "
        f"perf_counter_ns instead, the bookkeeping alone: {statistics.median(bookkeeping):.4f}x; "
        f"A/A control {statistics.median(control):.4f}x; medians of {rounds} rounds); one "
        f"time.thread_time_ns() {_read_us(time.thread_time_ns):.2f} us",
        flush=True,
    )


def interleaved(runner: ProfiledForward, rounds: int) -> list[float]:
    """Per round: the forward with the reads over the forward without, in alternating order."""
    ratios = []
    for round_no in range(rounds):
        if round_no % 2:
            bare, read = runner.seconds(runner.plain), runner.seconds(runner.reading)
        else:
            read, bare = runner.seconds(runner.reading), runner.seconds(runner.plain)
        ratios.append(read / bare)
    return ratios


def _read_us(read: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(10_000):
        read()
    return (time.perf_counter() - start) / 10_000 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--busy", type=int, default=2, help="busy processes in the loaded run")
    parser.add_argument("--cost", action="store_true", help="time the wait reads instead")
    parser.add_argument("--bare", action="store_true", help="the layers' own code beside it")
    parser.add_argument("--pinned", action="store_true", help="--bare, busy on the other CPU")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=1, help="measure every model this often")
    args = parser.parse_args()
    if args.cost:
        wait_cost()
        range_read_cost()
        return
    with tempfile.TemporaryDirectory(prefix="hybridprof-busy-") as folder:
        root = Path(folder)
        if args.pinned:
            for _ in range(args.repeat):
                bare_pinned(root, args.iters, args.busy, args.models)
            return
        if args.bare:
            for repeat in range(args.repeat):  # each set in its own folder: run never overwrites
                (root / str(repeat)).mkdir()
                bare_against_profiled(root / str(repeat), args.iters, args.busy, args.models)
            return
        for file in args.models:
            model = root / file
            model.write_text(MODELS[file])
            before = loadavg()
            quiet, _ = profiled(model, root / f"{file}.quiet.json", args.iters)
            with busy(args.busy):
                loaded, printed = profiled(model, root / f"{file}.busy.json", args.iters)
                during = loadavg()  # the 1-minute average lags: read after the busy run
            print(f"[load {before} quiet, {during} busy; {os.cpu_count()} cores]", end=" ")
            compare(file, quiet, loaded, printed)


if __name__ == "__main__":
    main()
