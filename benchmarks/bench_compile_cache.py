"""A second `hybridprof run --compile` in a new process against torch.compile's own second compile.

    .venv/bin/python benchmarks/bench_compile_cache.py            # 3 rounds per model
    .venv/bin/python benchmarks/bench_compile_cache.py --quick    # 1 round

Per model (tests/fixtures/gpt_blocks.py, the 4-block GPT, and the 2-block nn.MultiheadAttention
transformer of tests/fixtures/compiled_models.py) and round, with fresh cache folders of its own
for each side (TORCHINDUCTOR_CACHE_DIR, and XDG_CACHE_HOME for hybridprof's kernel maps), four
new processes, interleaved so that drift hits both sides alike: torch.compile's first process,
`hybridprof run --compile`'s first, torch.compile's second, hybridprof's second. The caches are as
a user has them (on, inductor's defaults): each side's second process finds what its first
stored. Compile time is dynamo's own figure for the forward frames (the same bookkeeping on both
sides: `get_compilation_metrics()`, the session's `compiled.compile_s`); beside it the wall time
of the compiling call (torch: the first call; hybridprof: its warm-up, as its progress line says).
The ratio of the second processes' compile times is taken per round; the median over rounds is
printed. And: whether the second run's kernel map (every layer's kernels, what each fused, the
map's figures) is the first run's, and how many graphs inductor's cache answered.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = {
    "gpt_blocks": ROOT / "tests" / "fixtures" / "gpt_blocks.py",
    "mha": ROOT / "tests" / "fixtures" / "compiled_models.py",
}
HYBRIDPROF = Path(sys.executable).with_name("hybridprof")
WARMUP_LINE = re.compile(r"warm-up took ([0-9.]+) s")


def torch_child(model_file: str) -> dict[str, float]:
    """torch.compile of the model file's model, its first call timed, in this process."""
    import runpy

    import torch

    sys.path.insert(0, str(ROOT))
    from hybridprof.runtime.compiled import dynamo_facts

    torch.set_num_threads(1)  # as hybridprof runs it (--threads 1)
    namespace = runpy.run_path(model_file)
    model, inputs = namespace["build_model"]().eval(), namespace["example_inputs"]()
    compiled = torch.compile(model)
    with torch.no_grad():  # hybridprof runs forwards under no_grad
        before = dynamo_facts.snapshot()
        start = time.perf_counter()
        compiled(*inputs)
        wall = time.perf_counter() - start
    return {"compile_s": dynamo_facts.since(before).compile_s, "wall_s": wall}


def _env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
        "XDG_CACHE_HOME": str(home / "xdg"),
    }


def _torch_process(model_file: Path, home: Path) -> dict[str, float]:
    argv = [sys.executable, __file__, "--torch-child", str(model_file)]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(home), check=True)
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _hybridprof_process(model_file: Path, home: Path, out: str) -> dict[str, Any]:
    argv = [str(HYBRIDPROF), "run", str(model_file), "--compile", "--threads", "1"]
    argv += ["--warmup", "1", "--iters", "3", "--out-dir", str(home / out)]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(home), cwd=home)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1:])
    session = json.loads((home / out / "session.json").read_text())
    compiled = session["compiled"]
    wall = WARMUP_LINE.search(done.stderr)
    return {
        "compile_s": compiled.get("compile_s", 0.0),
        "wall_s": float(wall.group(1)) if wall else float("nan"),
        "hits": compiled.get("cache_hits", 0),
        "map": _kernel_map(session),
    }


def _kernel_map(session: dict[str, Any]) -> Any:
    """Every layer's kernels, what each layer fused, and the map's figures."""
    compiled = session["compiled"]
    ops = {r["path"]: sorted(r.get("ops", {}).get("name", [])) for r in session["records"]}
    figures = ("kernel_map", "call_sites", "matched_events", "unmatched_events", "layers")
    return ops, {name: compiled.get(name) for name in figures}


def one_round(model_file: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as torch_home, tempfile.TemporaryDirectory() as own_home:
        torch_first = _torch_process(model_file, Path(torch_home))
        own_first = _hybridprof_process(model_file, Path(own_home), "first")
        torch_second = _torch_process(model_file, Path(torch_home))
        own_second = _hybridprof_process(model_file, Path(own_home), "second")
    return {
        "torch": (torch_first, torch_second),
        "own": (own_first, own_second),
        "ratio": own_second["compile_s"] / torch_second["compile_s"],
        "wall_ratio": own_second["wall_s"] / torch_second["wall_s"],
        "same_map": own_first["map"] == own_second["map"],
        "hits": own_second["hits"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=sorted(MODELS), action="append")
    parser.add_argument("--torch-child", metavar="MODEL_FILE")
    args = parser.parse_args()
    if args.torch_child:
        print(json.dumps(torch_child(args.torch_child)))
        return
    rounds = 1 if args.quick else args.rounds
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name in args.model or sorted(MODELS):
        found = [one_round(MODELS[name]) for _ in range(rounds)]
        for index, r in enumerate(found, 1):
            (tf, ts), (hf, hs) = r["torch"], r["own"]
            print(
                f"{name} round {index}: compile s (wall s) torch first {tf['compile_s']:.1f} "
                f"({tf['wall_s']:.1f}), hybridprof first {hf['compile_s']:.1f} ({hf['wall_s']:.1f})"
                f"; torch second {ts['compile_s']:.2f} ({ts['wall_s']:.2f}), hybridprof second "
                f"{hs['compile_s']:.2f} ({hs['wall_s']:.2f}); graphs from the cache "
                f"{r['hits']}, kernel map the first run's: {r['same_map']}"
            )
        ratio = statistics.median(r["ratio"] for r in found)
        wall = statistics.median(r["wall_ratio"] for r in found)
        same = all(r["same_map"] for r in found)
        print(
            f"{name}: second-process compile, hybridprof / torch.compile: {ratio:.2f}x (wall of "
            f"the compiling call {wall:.2f}x), median of {rounds}; kernel map identical: {same}"
        )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
