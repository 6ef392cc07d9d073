"""How far the numbers can be trusted, in words every renderer shares.

Three things: the session's stability verdict (one line: what made it noisy and the fix), how the
iteration counts were decided and why the run stopped, and each median's confidence interval,
written `84.200us ±3%` (the wider side of the 95% interval of `hybridprof.analysis.stats`, in %
of the median). A median gets an interval only when its per-iteration values were kept and there are
enough of them (6 for 95%); otherwise the number stands alone, as in torchprof.
"""

from __future__ import annotations

import math

from hybridprof.analysis.layer_table import Timing
from hybridprof.analysis.stats import CI_METHOD, CONFIDENCE, median_ci
from hybridprof.datamodel import ProfileSession, Series, Stability
from hybridprof.reporting.format import format_time_us

INTERVAL_NOTE = (
    f"± is the {100 * CONFIDENCE:.0f}% confidence interval of each median over the measured "
    f"iterations ({CI_METHOD}), its wider side in % of the median; shown from 6 iterations on."
)


def interval_pct(series: Series | None) -> float | None:
    """The median's interval half-width in % (None: no series, too few values, or a zero median)."""
    if series is None:
        return None
    interval = median_ci(series.values)
    if interval is None:
        return None
    pct = interval.half_width_pct()
    return pct if math.isfinite(pct) else None


def pct_text(pct: float | None) -> str:
    """±3%, ±0.4% (one decimal below 1%); empty without an interval."""
    if pct is None:
        return ""
    return f"±{pct:.1f}%" if pct < 1 else f"±{pct:.0f}%"


def time_with_interval(median_us: float, series: Series | None) -> str:
    """`84.200us ±3%`, or just `84.200us` without an interval."""
    suffix = pct_text(interval_pct(series))
    return format_time_us(median_us) + (f" {suffix}" if suffix else "")


def timing_text(timing: Timing | None) -> str:
    """A layer table's time as `84.200us ±3%` (or `84.200us`); empty where the row has none."""
    if timing is None:
        return ""
    suffix = pct_text(timing.interval_pct())
    return format_time_us(timing.median) + (f" {suffix}" if suffix else "")


def has_intervals(session: ProfileSession) -> bool:
    return any(
        interval_pct(r.per_iteration.self_cpu_us) is not None
        for r in session.records
        if r.per_iteration is not None
    )


def stability_text(stability: Stability) -> str:
    """Why the verdict, without the verdict: `<causes>: <fixes> (<figures>)`, or the figures
    alone."""
    threads = f"{stability.threads} torch thread{'s' if stability.threads != 1 else ''}"
    load = f"load {stability.load:.2f} per core"
    if stability.advice:
        return f"{stability.advice} (CV {100 * stability.iteration_cv:.1f}%, {load}, {threads})"
    return f"iteration times vary by {100 * stability.iteration_cv:.1f}% (CV), {load}, {threads}"


def stability_line(session: ProfileSession) -> str | None:
    """The terminal's warning line for a noisy run; None when stable or not judged (old files)."""
    stability = session.stability
    if stability is None or stability.verdict != "noisy":
        return None
    return f"noisy timings: {stability_text(stability)}"


def iterations_text(session: ProfileSession) -> str:
    """`3 warm-up, 20 measured`, with auto counts and why the run stopped where that says more."""
    warmup = f"{session.warmup} warm-up"
    if session.requested_warmup == "auto":
        warmup += " (auto: until iteration times stopped falling)"
    note = _stop_note(session)
    return f"{warmup}, {session.iterations} measured" + (f" ({note})" if note else "")


def _stop_note(session: ProfileSession) -> str:
    asked = session.requested_iterations
    auto = "auto: " if asked == "auto" else ""
    if session.interrupted:
        return f"interrupted; {asked} requested" if isinstance(asked, int) else "interrupted"
    if session.stop_reason == "converged":
        return "auto: until the median's 95% confidence interval was within ±3%"
    if session.stop_reason == "max_time":
        limit = f" ({session.max_time_s:g} s)" if session.max_time_s else ""
        return f"{auto}stopped when the time limit{limit} ran out"
    if session.stop_reason == "max_iterations":
        return f"{auto}stopped at the iteration cap"
    return ""


__all__ = [
    "INTERVAL_NOTE",
    "has_intervals",
    "interval_pct",
    "iterations_text",
    "pct_text",
    "stability_line",
    "stability_text",
    "time_with_interval",
    "timing_text",
]
