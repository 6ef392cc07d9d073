"""The speed-up of compiled over eager per layer, as text: what `--compare-eager` prints."""

from __future__ import annotations

from hybridprof.analysis.tree import OUTSIDE_ROW
from hybridprof.datamodel import ProfileSession
from hybridprof.diff.speedup import SpeedupResult
from hybridprof.reporting.format import format_time_us, visible

NAME_WIDTH = 44


def render_speedup(result: SpeedupResult) -> str:
    """One line per layer: total per iteration eager, compiled, speed-up with its interval from
    the pairs of iterations (a paired run), what fused."""
    lines = [
        f"{'Module':<{NAME_WIDTH}} {'Eager':>12} {'Compiled':>12} {'Speed-up':>9} "
        f"{'95% interval':>15}  Fused",
        "-" * (NAME_WIDTH + 61),
    ]
    for row in result.rows():
        name = ("  " * row.depth + (row.path.rpartition(".")[2] or "(root)"))[:NAME_WIDTH]
        fused = ", ".join(_relative(row.path, f) for f in row.fused)
        lines.append(
            f"{visible(name):<{NAME_WIDTH}} {_time(row.eager_us):>12} {_time(row.compiled_us):>12} "
            f"{_speedup(row.speedup, row.eager_us, row.compiled_us):>9} "
            f"{_interval(row.interval):>15}  {visible(fused)}"
        )
    outside = [s.outside_cpu_us.median if s.outside_cpu_us else None for s in _sides(result)]
    lines.append(f"{OUTSIDE_ROW:<{NAME_WIDTH}} {_time(outside[0]):>12} {_time(outside[1]):>12}")
    eager, compiled = result.iteration_us()
    overall = result.speedup()
    lines.append(
        f"iteration (median): eager {format_time_us(eager)}, compiled {format_time_us(compiled)}"
        + (f", speed-up {overall:.2f}x" if overall else "")
        + (f" {_interval(whole)}" if overall and (whole := result.iteration_interval()) else "")
    )
    section = result.compiled.compiled
    if section is not None:
        lines.append(
            f"compile time {section.compile_s:.2f} s in warm-up ({section.graphs} graph"
            f"{'s' if section.graphs != 1 else ''}, {len(section.graph_breaks)} graph breaks); "
            "in no layer's time"
        )
    return "\n".join(lines) + "\n"


def _sides(result: SpeedupResult) -> tuple[ProfileSession, ProfileSession]:
    return result.eager, result.compiled


def _time(us: float | None) -> str:
    return "-" if us is None else format_time_us(us)


def _interval(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f"[{interval[0]:.2f}-{interval[1]:.2f}x]"


def _speedup(value: float | None, eager: float | None, compiled: float | None) -> str:
    if value is not None:
        return f"{value:.2f}x"
    if eager and not compiled:
        return "fused"  # its work ran in other layers' kernels
    return "-"


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


__all__ = ["render_speedup"]
