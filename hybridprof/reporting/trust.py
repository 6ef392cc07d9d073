"""How far the numbers can be trusted, in words every renderer shares.

Three things: the session's stability verdict (one line: what made it noisy and the fix), how the
iteration counts were decided and why the run stopped, and each median's confidence interval,
written `84.200us ±3%` (the wider side of the 95% interval of `hybridprof.analysis.stats`, in %
of the median). A median gets an interval only when its per-iteration values were kept and there are
enough of them (6 for 95%); otherwise the number stands alone, as in torchprof.
"""

from __future__ import annotations

import math

from hybridprof.analysis.layer_table import LayerTable, Timing
from hybridprof.analysis.stats import CI_METHOD, CONFIDENCE, Interval, median_ci
from hybridprof.analysis.typical_steps import TYPICAL_BAND, kept_steps
from hybridprof.datamodel import ProfileSession, Series, Stability
from hybridprof.reporting.format import format_time_us

INTERVAL_NOTE = (
    f"± is the {100 * CONFIDENCE:.0f}% confidence interval of each median over the measured "
    f"iterations ({CI_METHOD}), in % of the median: -a% +b% where one side is over twice the "
    "other, a range (low to high) where the interval is wider than the median itself; shown "
    "from 6 iterations on."
)
INFLATED = "(inflated)"  # a time measured with more torch threads than free cores
LOPSIDED = 2.0  # one side of an interval over this many times the other: both sides are shown


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
    return f"±{_pct(pct)}"


def interval_text(interval: Interval | None) -> str:
    """A median's interval as a person reads it: `±3%`; `-2% +9%` when lopsided; `(12.000us to
    3.100ms)` when wider than the median (a `±N%` over 100 says nothing); empty without one."""
    if interval is None or interval.median <= 0:
        return ""
    median = interval.median
    if interval.high - interval.low > median:
        return f"({format_time_us(interval.low)} to {format_time_us(interval.high)})"
    below = 100.0 * (median - interval.low) / median
    above = 100.0 * (interval.high - median) / median
    if max(below, above) >= 1 and max(below, above) > LOPSIDED * min(below, above):
        return f"-{_pct(below)} +{_pct(above)}"
    return pct_text(max(below, above))


def _pct(pct: float) -> str:
    return f"{pct:.1f}%" if pct < 1 else f"{pct:.0f}%"


def time_with_interval(median_us: float, series: Series | None) -> str:
    """`84.200us ±3%`, or just `84.200us` without an interval."""
    interval = median_ci(series.values) if series is not None else None
    suffix = interval_text(interval)
    return format_time_us(median_us) + (f" {suffix}" if suffix else "")


def timing_text(timing: Timing | None) -> str:
    """A layer table's time as `84.200us ±3%` (or `84.200us`, or `84.200us (inflated)` when
    measured with more threads than free cores); empty where the row has none."""
    if timing is None:
        return ""
    if timing.inflated:
        return f"{format_time_us(timing.median)} {INFLATED}"
    suffix = interval_text(timing.interval)
    return format_time_us(timing.median) + (f" {suffix}" if suffix else "")


def has_intervals(session: ProfileSession) -> bool:
    """Do the rows show their medians' intervals (a rank's means over its typical steps have
    none)?"""
    if kept_steps(session) is not None:
        return False
    return any(
        interval_pct(r.per_iteration.self_cpu_us) is not None
        for r in session.records
        if r.per_iteration is not None
    )


def stability_text(stability: Stability) -> str:
    """Why the verdict, without the verdict, in one short line: `<causes>: <fixes>`, or how much
    the iteration times spread."""
    if stability.advice:
        return stability.advice
    return f"iteration times vary by {100 * stability.iteration_cv:.1f}%"


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


HEADLINE_GAP = 0.05  # a measured median iteration this far from the headline is said beside it


def statistic_line(table: LayerTable) -> str:
    """Which statistic the table shows, in one line ("" when the totals are as measured)."""
    if not table.summed:
        return ""
    each = f"each row is {statistic_text(table)}{compensation_text(table)}"
    return f"{each}; totals are the sums of their rows"


def statistic_text(table: LayerTable) -> str:
    """The figure each row states: its median over the iterations, or a rank's mean over its
    typical steps (`analysis.typical_steps`)."""
    plural = "" if table.iterations == 1 else "s"
    kept = table.typical_steps
    if kept is None:
        return f"its median over {table.iterations} iteration{plural}"
    band = f"{TYPICAL_BAND:.0%}"
    return (
        f"its mean over the {kept} step{'' if kept == 1 else 's'} of {table.iterations} within "
        f"{band} of the median step (a rank's waits move from layer to layer between steps: "
        "means over the same steps keep them, so the rows add up to the step)"
    )


def compensation_text(table: LayerTable) -> str:
    """What a compensated table took out of its figures, and where the raw ones are ("" for a
    raw table): the headline is the compensated figure, as near as the calibration gets to the
    model without the profiler (docs/trust.md)."""
    found = table.calibration
    if found is None:
        return ""
    raw = format_time_us(table.raw_iteration_us or 0.0)
    how = "calibrated on this machine"
    if found.bare_step_us is not None:  # beside, not used: a few bare steps are too noisy
        how += f"; the step unprofiled took {format_time_us(found.bare_step_us)}"
    moved = ""
    if found.call_us > 0:  # schema 13: each call's bare dispatch counts in its layer
        moved = f", each call's dispatch ({format_time_us(found.call_us)}) moved into its layer"
    return (
        f", less the profiler's own cost ({format_time_us(found.event_us)} per op, "
        f"{format_time_us(found.range_us)} per layer call{moved}, {how}; "
        f"{raw} raw, as measured: raw columns in the report and CSV)"
    )


def _gap_shown(table: LayerTable) -> bool:
    """Whether the median iteration is over HEADLINE_GAP off the headline, as a share of the
    median iteration as measured (a share of the smaller compensated figure would say more often
    that the same iterations varied)."""
    measured = table.raw_measured_iteration_us or table.measured_iteration_us
    return abs(table.measured_iteration_us - table.iteration_us) > HEADLINE_GAP * measured


def headline_gap_line(table: LayerTable) -> str:
    """The measured median iteration beside the headline where they differ by over 5% ("" where
    they do not, or where the headline is the measured one)."""
    headline, measured = table.iteration_us, table.measured_iteration_us
    if not table.summed or measured <= 0 or not _gap_shown(table):
        return ""
    gap = format_time_us(abs(measured - headline))
    if measured > headline:
        why = f"{gap} of it waiting for a CPU or in no row's median"
    else:
        why = f"{gap} less than its rows' medians summed (the iterations varied)"
    return (
        f"the median iteration took {_median_iteration_text(table)}, {why}: "
        f"the rows' sum ({format_time_us(headline)}) is the headline"
    )


def _median_iteration_text(table: LayerTable) -> str:
    """The median iteration as the table's figures state it: with the profiler's cost out where
    the table is compensated (its time as measured beside), else as measured."""
    measured = format_time_us(table.measured_iteration_us)
    if table.raw_measured_iteration_us is None:
        return f"{measured} as measured"
    raw = format_time_us(table.raw_measured_iteration_us)
    return f"{measured} with the profiler's cost out ({raw} as measured)"


def headline_note(table: LayerTable) -> str:
    """The report header's note on its figure, in one sentence: which statistic it is, and the
    measured median iteration where that is over 5% off ("" when the totals are as measured)."""
    if not table.summed:
        return ""
    note = f"Each row is {statistic_text(table)}"
    note += f"{compensation_text(table)}, a total the sum of its rows"
    headline, measured = table.iteration_us, table.measured_iteration_us
    if measured > 0 and _gap_shown(table):
        gap = format_time_us(abs(measured - headline))
        why = "more: waiting for a CPU, or in no row's median" if measured > headline else "less"
        note += f"; the median iteration took {_median_iteration_text(table)} ({gap} {why})"
    return note + "."


__all__ = [
    "HEADLINE_GAP",
    "INFLATED",
    "INTERVAL_NOTE",
    "compensation_text",
    "has_intervals",
    "headline_gap_line",
    "headline_note",
    "interval_pct",
    "interval_text",
    "iterations_text",
    "pct_text",
    "stability_line",
    "stability_text",
    "statistic_line",
    "statistic_text",
    "time_with_interval",
    "timing_text",
]
