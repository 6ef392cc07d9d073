"""Stability and per-layer intervals as every report shows them (hand-made sessions, no torch)."""

from __future__ import annotations

from dataclasses import replace

from hybridprof.datamodel import IterationSeries, ProfileSession, Series, Stability
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.text_report import render_text_report
from hybridprof.reporting.text.text_table import render_text
from hybridprof.reporting.trust import (
    interval_pct,
    iterations_text,
    stability_line,
    time_with_interval,
)
from tests.sessions import HOSTILE, small_session

NOISY = Stability("noisy", 0.31, 1.6, 2, "use one torch thread (--threads 1)")
STABLE = Stability("stable", 0.012, 0.1, 1, "")
# 8 iterations around 520 us: the order-statistic interval is [x(1), x(8)] = [500, 540]
FC1 = (520.0, 510.0, 530.0, 500.0, 540.0, 515.0, 525.0, 522.0)


def session_with(values: tuple[float, ...], **kw: object) -> ProfileSession:
    base = small_session()
    n = len(values)
    records = tuple(
        replace(
            r,
            per_iteration=IterationSeries(
                Series.of(values if r.path == "fc1" else [r.self_cpu_us.median] * n)
            ),
        )
        for r in base.records
    )
    iteration = tuple(1000.0 + i for i in range(n))
    return replace(base, records=records, iterations=n, iteration_cpu_us=iteration, **kw)  # type: ignore[arg-type]


def test_an_interval_needs_six_values_and_is_its_wider_side() -> None:
    assert interval_pct(Series.of(FC1)) == 100 * 21 / 521.0
    assert interval_pct(Series.of(FC1[:5])) is None
    assert interval_pct(None) is None
    assert interval_pct(Series.of([0.0] * 8)) is None
    assert time_with_interval(521.0, Series.of(FC1)) == "521.000us ±4%"
    assert time_with_interval(100.0, Series.of([100.0, 100.2] * 4)) == "100.000us ±0.1%"
    assert time_with_interval(521.0, None) == "521.000us"


def test_text_table_shows_intervals_only_with_enough_iterations() -> None:
    table = render_text(session_with(FC1))
    fc1 = next(line for line in table.splitlines() if "fc1" in line)
    assert "520.000us ±4%" in fc1  # the record's median, the series' interval
    few = render_text(session_with(FC1[:5]))
    assert "±" not in few
    assert render_text(small_session()) == render_text(replace(small_session(), stability=NOISY))


def test_text_report_says_stability_iterations_and_the_interval_method() -> None:
    report = render_text_report(session_with(FC1, stability=NOISY))
    assert "stability: noisy: use one torch thread (--threads 1) (CV 31.0%, load 1.60 per core" in (
        report
    )
    assert "order-statistic" in report
    assert "stability:" not in render_text_report(small_session())  # schema 1 style: no verdict


def test_terminal_line_only_for_noisy_runs() -> None:
    assert stability_line(session_with(FC1, stability=STABLE)) is None
    assert stability_line(small_session()) is None
    line = stability_line(session_with(FC1, stability=NOISY))
    assert line is not None and line.startswith("noisy timings: use one torch thread (--threads 1)")


def test_iterations_text_names_auto_and_why_the_run_stopped() -> None:
    base = small_session()
    assert iterations_text(base) == "2 warm-up, 3 measured"
    converged = replace(
        base, requested_iterations="auto", requested_warmup="auto", stop_reason="converged"
    )
    assert iterations_text(converged) == (
        "2 warm-up (auto: until iteration times stopped falling), 3 measured "
        "(auto: until the median's 95% confidence interval was within ±3%)"
    )
    timed_out = replace(base, requested_iterations="auto", stop_reason="max_time", max_time_s=30.0)
    assert iterations_text(timed_out).endswith("(auto: stopped when the time limit (30 s) ran out)")
    stopped = replace(base, interrupted=True, stop_reason="interrupted", requested_iterations=20)
    assert iterations_text(stopped) == "2 warm-up, 3 measured (interrupted; 20 requested)"


def test_html_shows_the_verdict_at_the_top_and_intervals_in_the_table() -> None:
    page = render_html(session_with(FC1, stability=NOISY))
    top = page.index('id="stability"')
    assert top < page.index('id="charts"') and top < page.index('id="layers"')
    assert 'class="stability noisy"' in page
    assert "520.000us ±4%" in page
    assert "order-statistic" in page
    ctx = build_context(session_with(FC1, stability=STABLE), "pdf")
    assert ctx.stability is not None and ctx.stability.verdict == "stable"
    assert build_context(small_session()).stability is None


def test_advice_is_escaped() -> None:
    page = render_html(replace(small_session(), stability=replace(NOISY, advice=HOSTILE)))
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_frames_carry_each_self_time_interval() -> None:
    frame = session_with(FC1).to_dataframe().set_index("path")
    assert (frame.loc["fc1", "self_cpu_us_ci_low"], frame.loc["fc1", "self_cpu_us_ci_high"]) == (
        500.0,
        540.0,
    )
    few = session_with(FC1[:5]).to_dataframe()
    assert few["self_cpu_us_ci_low"].isna().all() and few["self_cpu_us_ci_high"].isna().all()
