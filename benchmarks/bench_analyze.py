"""Static analysis time of a big real source file, as a ratio to `python -c 'import torch.nn'`.

Both are measured in this run, interleaved (analysis, import, analysis, ...), medians of N rounds,
each in a fresh process so caches do not flatter either side. The analysis is what the planner does
for a file: parse once, then resolve names and positions for every class in it (worst case; a live
plan only reads the classes of non-leaf modules).

usage: .venv/bin/python benchmarks/bench_analyze.py [--file PATH] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ANALYZE = """
import sys, time
t0 = time.perf_counter()
from hybridprof.planner.source_index import index_file
index = index_file(sys.argv[1])
infos = index.analyze(sorted(index.classes_by_line))
print(time.perf_counter() - t0, len(infos))
"""
IMPORT = "import time; t0 = time.perf_counter(); import torch.nn; print(time.perf_counter() - t0)"


def default_file() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "nn" / "modules" / "activation.py"


def timed(code: str, *args: str) -> tuple[float, str]:
    """Seconds reported by the child for its own work (interpreter start-up excluded)."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    first = out.stdout.split()
    return float(first[0]), " ".join(first[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", type=Path, default=default_file())
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    lines = len(args.file.read_text().splitlines())
    analysis, imports, classes = [], [], ""
    for _ in range(args.rounds):
        seconds, classes = timed(ANALYZE, str(args.file))
        analysis.append(seconds)
        imports.append(timed(IMPORT)[0])
    ratios = [a / i for a, i in zip(analysis, imports, strict=True)]
    print(f"file: {args.file} ({lines} lines, {classes} classes analyzed)")
    analysis_s, import_s = statistics.median(analysis), statistics.median(imports)
    print(f"analysis (import libcst + parse + metadata, every class): median {analysis_s:.3f} s")
    print(f"python -c 'import torch.nn':                               median {import_s:.3f} s")
    print(
        f"ratio analysis / import torch.nn: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {args.rounds} paired rounds; target < 1)"
    )


if __name__ == "__main__":
    main()
