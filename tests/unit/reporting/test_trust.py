"""Stability and per-layer intervals as every report shows them (hand-made sessions, no torch)."""

from __future__ import annotations

import re
from dataclasses import replace

from hybridprof.cli.terminal import summary_line
from hybridprof.datamodel import IterationSeries, ProfileSession, Series, Stability
from hybridprof.reporting.notebook import session_html
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table
from hybridprof.reporting.text.text_report import render_text_report
from hybridprof.reporting.text.text_table import render_text
from hybridprof.reporting.trust import (
    INFLATED,
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
    assert "stability: noisy: use one torch thread (--threads 1)\n" in report
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


# A busy machine's layer: most iterations ~40 us, two hit by a scheduler slice (the interval,
# [x(1), x(8)] of 8 values, is far wider than the median).
WILD = (40.0, 45.0, 41.0, 15000.0, 43.0, 39.0, 9000.0, 44.0)
# Steady but for one slow iteration: the interval [99.5, 130] is lopsided (0.6% below, 30% above).
LOPSIDED = (100.0, 101.0, 99.5, 100.5, 130.0, 100.2, 99.8, 100.1)
OVER_100 = re.compile(r"±\s*(\d+(?:\.\d+)?)\s*%")


def every_view(session: ProfileSession) -> dict[str, str]:
    """What each view that prints intervals shows of `session`."""
    return {
        "terminal": fitted_table(session, TableChoice(width=200)).text,
        "summary": summary_line(session),
        "text table": render_text(session),
        "text report": render_text_report(session),
        "html": render_html(session),
        "notebook": session_html(session),
    }


def test_no_view_prints_an_interval_wider_than_its_figure_as_a_percentage() -> None:
    session = session_with(WILD)
    for view, text in every_view(session).items():
        quoted = [float(n) for n in OVER_100.findall(text)]
        assert all(n <= 100 for n in quoted), (view, quoted)
    fc1 = next(line for line in render_text(session).splitlines() if "fc1" in line)
    assert "(39.000us to 15.000ms)" in fc1  # a range instead
    assert "(39.000us to 15.000ms)" in fitted_table(session, TableChoice(width=200)).text


def test_a_lopsided_interval_is_printed_with_both_sides() -> None:
    session = session_with(LOPSIDED)
    fc1 = next(line for line in render_text(session).splitlines() if "fc1" in line)
    assert "-0.6% +30%" in fc1 and "±30%" not in fc1
    assert time_with_interval(100.0, Series.of(FC1)) == "100.000us ±4%"  # near-symmetric: ±


def test_csv_and_json_keep_the_raw_interval_bounds() -> None:
    frame = session_with(WILD).to_dataframe()
    row = frame[frame["path"] == "fc1"].iloc[0]
    assert (row["self_cpu_us_ci_low"], row["self_cpu_us_ci_high"]) == (39.0, 15000.0)


def test_threads_over_the_free_cores_mark_every_time_in_the_table_itself() -> None:
    over = Stability("noisy", 0.01, 1.0, 2, "other work used 1.0 of the 2 cores", True)
    session = session_with(FC1, stability=over)
    for view in ("terminal", "text table", "html", "notebook"):
        text = every_view(session)[view]
        assert INFLATED in text and "±4%" not in text, view
    assert INFLATED not in every_view(session_with(FC1, stability=NOISY))["terminal"]
