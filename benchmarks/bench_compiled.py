"""A compiled model's iteration under hybridprof against the same compiled model's bare forward.

    .venv/bin/python benchmarks/bench_compiled.py            # MLP, MHA transformer, GPT-2
    .venv/bin/python benchmarks/bench_compiled.py --quick    # fewer rounds

Each model (the MLP and the nn.MultiheadAttention transformer of tests/fixtures/compiled_models.py,
and Hugging Face GPT-2 from a config when transformers is installed) runs in its own process, once
with `torch.compile(model)` and once with `model.compile()`, at 1 thread. After the compile (the
first profile's warm-up), round after round: the bare compiled forward is timed (the median of
`CALLS` calls), then `hybridprof.profile` measures `ITERS` iterations of it; the ratio of the
profiled iteration (the median of the session's iterations: the time the rows add up to) to the
bare forward is taken per round, and the median over rounds is printed; beside it the same ratio
for torch's own profiler alone (the time it sees in one call), and the wall time of the
whole `profile()` call per step it ran (each measured iteration runs the step twice: a warm step
and the measured one; profiler start and stop, and reading the events, included) against it.
Also: the dynamo counters over the run (hybridprof must add no frame, graph, break or
recompile) and the load of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CALLS, ITERS = 30, 5


def _model(name: str) -> tuple[Any, Any]:
    import torch

    from tests.compiled_models import fresh

    torch.manual_seed(0)
    if name == "mlp":
        return fresh().MLP(d=64, hidden=128, n=3).eval(), torch.randn(8, 64)
    if name == "mha":
        return fresh().Transformer().eval(), torch.randint(0, 100, (2, 16))
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, bos_token_id=0,
                        eos_token_id=0, use_cache=False)  # fmt: skip
    return GPT2LMHeadModel(config).eval(), torch.randint(0, 1000, (2, 32))


def child(name: str, style: str, rounds: int) -> dict[str, Any]:
    """One model and compile style, in this process."""
    sys.path.insert(0, str(ROOT))
    import torch

    import hybridprof
    from tests.compiled_models import counters, delta

    torch.set_num_threads(1)
    eager, x = _model(name)
    if style == "model.compile":
        eager.compile()
        model = eager
    else:
        model = torch.compile(eager)
    ratios, walls, plain = [], [], []
    with torch.no_grad():  # the grad mode of every call: dynamo compiles the model for one
        before = counters()
        first = hybridprof.profile(model, x, warmup=1, iters=ITERS)  # compiles, hooked
        for _ in range(rounds):
            bare = []
            for _ in range(CALLS):
                start = time.perf_counter_ns()
                model(x)
                bare.append((time.perf_counter_ns() - start) / 1000)
            bare_us = statistics.median(bare)
            plain.append(_plain_profiler_us(model, x) / bare_us)
            session = hybridprof.profile(model, x, warmup=1, iters=ITERS)
            ratios.append(statistics.median(session.iteration_cpu_us) / bare_us)
            walls.append(session.duration_s * 1e6 / (2 * ITERS + 1) / bare_us)
    after = delta(before, counters())
    return {
        "model": name,
        "style": style,
        "ratio": statistics.median(ratios),
        "wall_ratio": statistics.median(walls),
        "plain_ratio": statistics.median(plain),
        "counters": after,
        "kernel_map": first.compiled.kernel_map if first.compiled else None,
        "compile_s": first.compiled.compile_s if first.compiled else None,
    }


def _plain_profiler_us(model: Any, x: Any) -> float:
    """The time torch's own profiler sees in one call (its second in the session, as hybridprof
    measures its step's second run): the floor any profiler-based measure stands on."""
    import torch

    profiler = torch.autograd.profiler.profile()
    profiler.__enter__()
    model(x)
    mark = time.time_ns()
    model(x)
    profiler.__exit__(None, None, None)
    spans = sorted(
        (e.start_ns(), e.end_ns()) for e in profiler.kineto_results.events() if e.start_ns() >= mark
    )
    covered, end = 0, -1
    for start, stop in spans:
        if start >= end:
            covered, end = covered + stop - start, stop
    return covered / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "STYLE"))
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, 3 if args.quick else args.rounds)))
        return
    models = ["mlp", "mha"]
    try:
        import transformers  # noqa: F401

        models.append("gpt2")
    except ImportError:
        print("transformers not installed: GPT-2 left out")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    header = f"{'model':6} {'style':14} {'profiled/bare':>14} {'torch profiler/bare':>20} "
    print(header + f"{'profile() wall/step/bare':>25}  dynamo (frames, graphs, breaks, recompiles)")
    for name in models:
        for style in ("torch.compile", "model.compile"):
            argv = [sys.executable, __file__, "--child", name, style]
            if args.quick:
                argv.append("--quick")
            done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
            if done.returncode:
                print(f"{name} {style}: failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            found = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name:6} {style:14} {found['ratio']:13.2f}x {found['plain_ratio']:19.2f}x "
                  f"{found['wall_ratio']:24.2f}x  "
                  f"{tuple(found['counters'])} (map {found['kernel_map']}, compile "
                  f"{found['compile_s']:.1f} s)")  # fmt: skip
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
