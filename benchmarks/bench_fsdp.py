"""Issue 35's must-holds for FSDP2, measured over many profiled runs on two ranks (gloo, CPU).

    .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        benchmarks/bench_fsdp.py [--runs 10] [--late-runs 3] [--steps 6]

The model is the benchmark's own (no test's): a small transformer, an embedding, six blocks
(layer norm, multi-head self-attention, an MLP) and a head; block 4's MLP is wide enough for the
block to hold 8x the parameters of each other block. Each block is an FSDP2 unit, then the root.
Each run builds the model afresh (seed = the run), trains it `--steps` steps without hybridprof,
then again from the same seed inside `hybridprof.Profile` (one warm-up step first), and checks:

- (a) block 4 ranks first among the units in gathered bytes and in all-gather time, on each
  rank;
- (b) the units' collective rows (all-gather, copy-out, re-gather, reduce-scatter, summed over
  the measured steps) against the benchmark's own clock around FSDP2's collective functions
  (`foreach_all_gather`, `foreach_all_gather_copy_out`, `foreach_reduce`, the calls FSDP2's
  ranges wrap), over the same steps;
- (c) per step, what the rows (each layer's forward and backward self time, the optimizer's)
  leave of the profiled step, against the outside row (measured op by op); the outside row's
  share; the profiled step against the step's wall time on the benchmark's clock; and the sum of
  the table's rows (a rank's: each its mean over the steps within 5% of the median step) against
  the median step, with the sum of every row's median beside it;
- (f) the parameters after training, bitwise, against the run without hybridprof.

Then `--late-runs` runs with rank 1 asleep 20 ms inside block 1's forward, merged on rank 0:
- (d) rank 0's wait at the next unit's all-gather (block 2's), and the rank it waited for.

Rank 0 prints one line per run and a summary; the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard import _fsdp_param_group

import hybridprof
from hybridprof.analysis.layer_table import layer_table
from hybridprof.analysis.rank_merge import merge_sessions
from hybridprof.datamodel import ProfileSession
from hybridprof.runtime.basics.quiet import quiet_fd2

WIDTH, HEADS, HIDDEN, BLOCKS, BIG, VOCAB = 128, 4, 1024, 6, 4, 100
BATCH, SEQ = 4, 8
LATE = {"block": 1, "on": False}  # rank 1 sleeps 20 ms in this block's forward while "on"
SLEEP_S = 0.020


class Block(nn.Module):
    def __init__(self, index: int, hidden: int) -> None:
        super().__init__()
        self.index = index
        self.norm1 = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, hidden)
        self.down = nn.Linear(hidden, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if LATE["on"] and self.index == LATE["block"] and dist.get_rank() == 1:
            time.sleep(SLEEP_S)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.down(torch.relu(self.up(self.norm2(x))))


def big_hidden() -> int:
    """The MLP width that gives a block 8x the parameters of a block of width HIDDEN."""
    small = sum(p.numel() for p in Block(0, HIDDEN).parameters())
    rest = small - (2 * WIDTH * HIDDEN + HIDDEN + WIDTH)  # attention and norms
    return round((8 * small - rest - WIDTH) / (2 * WIDTH + 1))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        wide = big_hidden()
        self.blocks = nn.ModuleList(Block(i, wide if i == BIG else HIDDEN) for i in range(BLOCKS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def sharded(seed: int) -> Net:
    torch.manual_seed(seed)
    model = Net()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


class CollectiveClock:
    """The wall time of FSDP2's collective functions, per step, on the benchmark's clock."""

    NAMES = ("foreach_all_gather", "foreach_all_gather_copy_out", "foreach_reduce")

    def __init__(self) -> None:
        self.steps: list[float] = [0.0]
        self._originals = {name: getattr(_fsdp_param_group, name) for name in self.NAMES}

    def __enter__(self) -> CollectiveClock:
        for name, original in self._originals.items():
            setattr(_fsdp_param_group, name, self._timed(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(_fsdp_param_group, name, original)

    def _timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.steps[-1] += (time.perf_counter() - start) * 1e6

        return timed

    def next_step(self) -> None:
        self.steps.append(0.0)


def train(
    model: Net, steps: int, after: Callable[[], None]
) -> tuple[list[torch.Tensor], list[float]]:
    """`steps` steps; the parameters after them and each step's wall time (us)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(dist.get_rank())
    walls = []
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=data)
        start = time.perf_counter()
        model(tokens).logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        walls.append((time.perf_counter() - start) * 1e6)
        after()
    return [p.to_local().detach().clone() for p in model.parameters()], walls


def profiled_run(seed: int, steps: int) -> tuple[ProfileSession, list[float], list[float], bool]:
    """(session, collective clock per step, wall per step, bitwise equal to the bare run)."""
    bare, _ = train(sharded(seed), steps + 1, lambda: None)
    model = sharded(seed)
    schedule = hybridprof.schedule(wait=0, warmup=1, active=steps)
    with (
        CollectiveClock() as clock,
        quiet_fd2(),
        hybridprof.Profile(model, schedule=schedule) as prof,
    ):

        def after() -> None:
            prof.step()
            clock.next_step()

        profiled, walls = train(model, steps + 1, after)
    same = all(torch.equal(a, b) for a, b in zip(bare, profiled, strict=True))
    return prof.session(), clock.steps[1 : steps + 1], walls[1:], same


def ranked_first(session: ProfileSession) -> tuple[str, str]:
    """The unit first in gathered bytes, and the one first in all-gather time, as the table
    shows them (its communication columns: medians over the steps)."""
    found = (r.comm_of("all_gather") for r in layer_table(session).rows)
    gathers = [c for c in found if c is not None]
    by_bytes = max(gathers, key=lambda c: c.nbytes).path
    by_time = max(gathers, key=lambda c: c.time_us.median).path
    return by_bytes, by_time


def rows_vs_clock(session: ProfileSession, clock: list[float]) -> float:
    """(the collective rows' time over the steps) / (the clock's) - 1."""
    rows = sum(sum(c.iteration_us) for c in session.fsdp)
    return rows / sum(clock[-session.iterations :]) - 1


def rows_vs_step(session: ProfileSession, walls: list[float]) -> tuple[float, ...]:
    """How far the rows are from the step. Per step, the rows (every layer's forward and
    backward self time, the optimizer's) leave a remainder of the profiled step: its median
    against the outside row's median (the outside row is measured op by op, with no per-step
    series), as a share of the median step; the outside row's share of the median step; the
    profiled step against the step's wall time on the benchmark's clock (the worst step); the
    sum of the table's rows (what it shows: means over the typical steps) against the median
    step, both with the profiler's cost out; and the sum of the rows' medians, the outside row's
    included, against the median step as measured."""
    assert session.optimizer is not None and session.optimizer.per_iteration is not None
    assert session.outside_cpu_us is not None
    series = [r.per_iteration for r in session.records if r.per_iteration is not None]
    outside = session.outside_cpu_us.median
    remainders, vs_wall = [], []
    for i, step in enumerate(session.iteration_cpu_us):
        rows = session.optimizer.per_iteration.values[i]
        for s in series:
            rows += s.self_cpu_us.values[i]
            rows += s.backward_self_cpu_us.values[i] if s.backward_self_cpu_us else 0.0
        remainders.append(step - rows)
        vs_wall.append(abs(step / walls[i] - 1))
    median_step = statistics.median(session.iteration_cpu_us)
    medians = outside + session.optimizer.self_cpu_us.median
    medians += sum(
        r.self_cpu_us.median + (r.backward_self_cpu_us.median if r.backward_self_cpu_us else 0.0)
        for r in session.records
    )
    table = layer_table(session)
    rows_sum = sum(r.own_us for r in table.rows if r.measured)
    return (
        abs(statistics.median(remainders) - outside) / median_step,
        outside / median_step,
        max(vs_wall),
        rows_sum / table.measured_iteration_us - 1,
        medians / median_step - 1,
    )


def late_run(seed: int, steps: int) -> dict[str, Any] | None:
    """Rank 1 late by 20 ms in block 1's forward; on rank 0, what the merge says."""
    LATE["on"] = True
    try:
        session, _, _, _ = profiled_run(seed, steps)
    finally:
        LATE["on"] = False
    sessions: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(sessions, session.to_json())
    if dist.get_rank() != 0:
        return None
    merged = merge_sessions([ProfileSession.from_json(text) for text in sessions])
    waits = {(c.path, c.kind): c for c in merged.fsdp if c.wait_us}
    most = max(waits.values(), key=lambda c: c.wait_us[0])
    return {
        "unit": f"{most.path} {most.kind}",
        "rank0_wait_ms": most.wait_us[0] / 1000,
        "rank1_wait_ms": most.wait_us[1] / 1000,
        "waited_for": most.waited_for,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--late-runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    rank = dist.get_rank()
    load_start = os.getloadavg()[0]
    numel = [sum(p.numel() for p in b.parameters()) for b in Net().blocks]
    if rank == 0:
        print(f"block {BIG}: {numel[BIG] / numel[0]:.2f}x the parameters of block 0 ({numel})")
    found: dict[str, list[Any]] = defaultdict(list)
    for run in range(args.runs):
        session, clock, walls, same = profiled_run(run, args.steps)
        mine = {
            "first": ranked_first(session),
            "rows_vs_clock": rows_vs_clock(session, clock),
            "rows_vs_step": rows_vs_step(session, walls),
            "bitwise": same,
        }
        both: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(both, mine)
        if rank == 0:
            for r, facts in enumerate(both):
                for key, value in facts.items():
                    found[f"{key} rank {r}"].append(value)
            print(f"run {run}: " + "; ".join(f"rank {r} {f}" for r, f in enumerate(both)))
    for run in range(args.late_runs):
        late = late_run(100 + run, args.steps)
        if late is not None:
            found["late"].append(late)
            print(f"late run {run}: {late}")
    if rank == 0:
        print(
            f"load {load_start:.2f} -> {os.getloadavg()[0]:.2f}; "
            f"{args.runs} runs of {args.steps} steps"
        )
        big = f"blocks.{BIG}"
        for r in range(dist.get_world_size()):
            firsts = found[f"first rank {r}"]
            wins = sum(by_bytes == by_time == big for by_bytes, by_time in firsts)
            clock = [abs(x) for x in found[f"rows_vs_clock rank {r}"]]
            steps = found[f"rows_vs_step rank {r}"]
            remainder, outside, wall, table, medians = ([x[k] for x in steps] for k in range(5))
            print(
                f"rank {r}: (a) {big} first in bytes and time {wins}/{len(firsts)}; "
                f"(b) collective rows vs clock: max |diff| {max(clock):.2%}, median "
                f"{statistics.median(clock):.2%}, within 2% in "
                f"{sum(x <= 0.02 for x in clock)}/{len(clock)}; (c) rows' remainder vs the "
                f"outside row: max {max(remainder):.3%} of the step; outside row "
                f"{min(outside):.2%} to {max(outside):.2%} of the step; profiled step vs wall, "
                f"worst step: {max(wall):.2%}; the table's rows vs the median step: "
                f"{min(table):+.2%} to {max(table):+.2%} (the medians summed: "
                f"{min(medians):+.2%} to {max(medians):+.2%}); "
                f"(f) bitwise {sum(found[f'bitwise rank {r}'])}/{len(firsts)}"
            )
    if rank == 0 and found["late"]:
        waits = [late["rank0_wait_ms"] for late in found["late"]]
        named = sum(late["waited_for"] == 1 for late in found["late"])
        print(
            f"(d) rank 0's wait: {min(waits):.1f} to {max(waits):.1f} ms (slept {SLEEP_S * 1e3:.0f}"
            f" ms), at {sorted({late['unit'] for late in found['late']})}, rank 1 named in "
            f"{named}/{len(waits)}"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
