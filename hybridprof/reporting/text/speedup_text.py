"""The speed-up of compiled over eager per layer, as text: what `--compare-eager` prints. The
figures are the comparison report's (`SpeedupSummary`), so the terminal and compare.html agree."""

from __future__ import annotations

from hybridprof.analysis.tree import OUTSIDE_ROW
from hybridprof.diff.speedup import SpeedupResult, SpeedupRow, SpeedupSummary
from hybridprof.reporting.format import format_time_us, visible

NAME_WIDTH = 44


def render_speedup(result: SpeedupResult | SpeedupSummary) -> str:
    """One line per layer: total per iteration eager, compiled, speed-up with its interval from
    the pairs of iterations (a paired run), the verdict, what fused; then the whole iteration
    (the headline), the threads each lane ran with and the compile time."""
    summary = result.summary() if isinstance(result, SpeedupResult) else result
    lines = [
        f"{'Module':<{NAME_WIDTH}} {'Eager':>12} {'Compiled':>12} {'Speed-up':>9} "
        f"{'95% interval':>15}  {'Verdict':<12}  Fused",
        "-" * (NAME_WIDTH + 75),
    ]
    for row in summary.rows:
        name = ("  " * row.depth + (row.path.rpartition(".")[2] or "(root)"))[:NAME_WIDTH]
        lines.append(f"{visible(name):<{NAME_WIDTH}} {_cells(row)}")
    outside = summary.eager.outside_us, summary.compiled.outside_us
    lines.append(f"{OUTSIDE_ROW:<{NAME_WIDTH}} {_time(outside[0]):>12} {_time(outside[1]):>12}")
    lines.append(headline_text(summary))
    lines.append(threads_text(summary))
    if summary.compile_line:
        lines.append(summary.compile_line)
    return "\n".join(lines) + "\n"


def headline_text(summary: SpeedupSummary) -> str:
    """The whole iteration, as the report's header states it."""
    row = summary.iteration
    speedup = row.speedup
    return (
        f"iteration (median): eager {_time(row.eager_us)}, compiled {_time(row.compiled_us)}"
        + (f", speed-up {speedup:.2f}x" if speedup else "")
        + (f" {interval_text(row.interval)}" if speedup and row.interval else "")
        + (f": {row.verdict}" if speedup else "")
    )


def threads_text(summary: SpeedupSummary) -> str:
    eager, compiled = summary.eager, summary.compiled
    pairs = f"{summary.pairs} pairs of iterations" if summary.paired else "unpaired runs"
    return (
        f"measured with {eager.threads} torch thread{'s' if eager.threads != 1 else ''} (eager) "
        f"and {compiled.threads} (compiled), {pairs}; verdicts at "
        f"{summary.threshold_pct:g}% from each speed-up's interval, no run-wide shift taken out"
    )


def speedup_text(row: SpeedupRow) -> str:
    """`3.20x`, `fused into blocks.0` (its work ran in that layer's kernels), or `-`."""
    if row.fused_into is not None:
        return f"fused into {row.fused_into or '(root)'}"
    return f"{row.speedup:.2f}x" if row.speedup is not None else "-"


def interval_text(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f"[{interval[0]:.2f}-{interval[1]:.2f}x]"


def fused_text(row: SpeedupRow) -> str:
    return ", ".join(_relative(row.path, f) for f in row.fused)


def _cells(row: SpeedupRow) -> str:
    speedup = speedup_text(row)
    if row.fused_into is not None:  # "fused into X" takes the speed-up and interval columns
        return f"{_time(row.eager_us):>12} {_time(row.compiled_us):>12} {visible(speedup):<25}"
    return (
        f"{_time(row.eager_us):>12} {_time(row.compiled_us):>12} {speedup:>9} "
        f"{interval_text(row.interval):>15}  {row.verdict:<12}  {visible(fused_text(row))}"
    )


class SpeedupTextRenderer:
    """The comparison as the table `--compare-eager` prints, in a .txt file."""

    extensions = (".txt",)
    binary = False

    def render(self, summary: SpeedupSummary) -> str:
        return render_speedup(summary)


def _time(us: float | None) -> str:
    return "-" if us is None else format_time_us(us)


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


__all__ = [
    "SpeedupTextRenderer",
    "fused_text",
    "headline_text",
    "interval_text",
    "render_speedup",
    "speedup_text",
]
