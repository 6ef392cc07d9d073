"""The speed-up of compiled over eager per layer, with its interval from the pairs of iterations."""

from __future__ import annotations

import html
from dataclasses import replace

import pytest

from hybridprof.datamodel import IterationSeries, ModuleRecord, ProfileSession, Series, Stat
from hybridprof.datamodel.compiled import CompiledLayer, CompileSection
from hybridprof.diff.speedup import SpeedupRow, SpeedupSummary, judge_speedup, speedup_of
from hybridprof.reporting.page.speedup_page import render_speedup_html
from hybridprof.reporting.text.speedup_text import headline_text, render_speedup, speedup_text
from tests.unit.diff.test_sessions import ITERS, run


def drifting(session: ProfileSession, scale: float) -> ProfileSession:
    """Every layer's and iteration's time x a drift that doubles over the run (a machine getting
    busier), times `scale`: the same drift as a paired partner run would see."""
    drift = [1.0 + i / ITERS for i in range(ITERS)]
    records: list[ModuleRecord] = []
    for record in session.records:
        assert record.per_iteration is not None
        own = record.per_iteration.self_cpu_us.values
        values = [v * d * scale for v, d in zip(own, drift, strict=True)]
        records.append(
            replace(
                record,
                self_cpu_us=Stat.of(values),
                total_cpu_us=Stat.of(values),
                per_iteration=IterationSeries(self_cpu_us=Series.of(values)),
            )
        )
    series = [r.per_iteration.self_cpu_us.values for r in records if r.per_iteration is not None]
    iterations = tuple(map(sum, zip(*series, strict=True)))
    return replace(session, records=tuple(records), iteration_cpu_us=iterations)


def test_a_paired_speed_up_has_a_tight_interval_from_its_pairs_despite_the_drift() -> None:
    eager = drifting(run(1), 1.0)
    compiled = drifting(run(1), 0.5)  # each pair exactly 2x, while each side drifts 2x
    result = speedup_of(eager, compiled, paired=True)
    rows = {row.path: row for row in result.rows() if row.path}
    for row in rows.values():
        assert row.interval is not None
        low, high = row.interval
        assert 1.99 < low <= high < 2.01  # the pairs' ratios, not the drifting medians
    whole = result.iteration_interval()
    assert whole is not None and 1.99 < whole[0] <= whole[1] < 2.01


def test_unpaired_sessions_have_no_speed_up_interval() -> None:
    result = speedup_of(drifting(run(1), 1.0), drifting(run(2), 0.5))
    assert all(row.interval is None for row in result.rows())
    assert result.iteration_interval() is None


def _with_layer_drift(session: ProfileSession, path: str, scale: float) -> ProfileSession:
    """The same run with one layer `scale` times slower in every iteration (and the iterations'
    totals with it)."""
    records = []
    for record in session.records:
        if record.path != path:
            records.append(record)
            continue
        assert record.per_iteration is not None
        values = [v * scale for v in record.per_iteration.self_cpu_us.values]
        records.append(
            replace(
                record,
                self_cpu_us=Stat.of(values),
                total_cpu_us=Stat.of(values),
                per_iteration=IterationSeries(self_cpu_us=Series.of(values)),
            )
        )
    series = [r.per_iteration.self_cpu_us.values for r in records if r.per_iteration is not None]
    return replace(
        session,
        records=tuple(records),
        iteration_cpu_us=tuple(map(sum, zip(*series, strict=True))),
    )


def test_no_run_wide_shift_is_taken_out_and_one_slower_layer_is_named_slower() -> None:
    """Compiling made every layer 2x faster but `act` 2x slower: the diff would take the shared
    2x as the machine's and call the rest within noise; the speed-up judges each on its own."""
    eager = drifting(run(1), 1.0)
    compiled = _with_layer_drift(drifting(run(1), 0.5), "act", 4.0)
    result = speedup_of(eager, compiled, paired=True)
    verdicts = {row.path: row.verdict for row in result.rows()}
    assert verdicts == {"fc1": "faster", "act": "slower", "fc2": "faster"}
    whole = result.iteration_row()
    assert whole.verdict == "faster" and whole.interval is not None


@pytest.mark.parametrize(
    ("interval", "verdict"),
    [
        ((1.08, 1.30), "faster"),
        ((0.70, 0.94), "slower"),
        ((0.97, 1.03), "within noise"),
        ((0.90, 1.20), "inconclusive"),
        ((1.02, 1.30), "inconclusive"),  # beyond noise on one side only: not decided
    ],
)
def test_a_speed_up_is_judged_on_its_whole_interval(
    interval: tuple[float, float], verdict: str
) -> None:
    row = SpeedupRow("fc", 1, 100.0, 100.0 / ((interval[0] + interval[1]) / 2), interval=interval)
    assert judge_speedup(row, 5.0) == verdict


def test_unpaired_runs_are_judged_on_the_medians_ratio() -> None:
    assert judge_speedup(SpeedupRow("fc", 1, 100.0, 50.0), 5.0) == "faster"
    assert judge_speedup(SpeedupRow("fc", 1, 100.0, 101.0), 5.0) == "within noise"
    assert judge_speedup(SpeedupRow("fc", 1, 100.0, None), 5.0) == "no figure"


def _fused_away(session: ProfileSession, path: str) -> ProfileSession:
    """`path`'s work ran inside fc2's kernels (and the root's, which names it too): no record."""
    section = CompileSection(
        backend="inductor",
        layers=(CompiledLayer("", fused=(path, "fc2")), CompiledLayer("fc2", fused=(path,))),
    )
    records = tuple(r for r in session.records if r.path != path)
    return replace(session, records=records, compiled=section)


def test_a_layer_whose_work_ran_in_another_layers_kernels_is_fused_into_it() -> None:
    result = speedup_of(drifting(run(1), 1.0), _fused_away(drifting(run(1), 0.5), "act"))
    row = next(r for r in result.rows() if r.path == "act")
    assert (row.verdict, row.fused_into) == ("fused", "fc2")  # the most specific owner
    assert speedup_text(row) == "fused into fc2"
    text = render_speedup(result)
    assert "fused into fc2" in text and "removed" not in text


def test_the_summary_round_trips_through_json_and_says_the_threads_used() -> None:
    eager = drifting(run(1), 1.0)
    compiled = _fused_away(drifting(run(1), 0.5), "act")
    compiled = replace(compiled, environment=replace(compiled.environment, threads=3))
    summary = speedup_of(eager, compiled, paired=True).summary()
    assert SpeedupSummary.from_json(summary.to_json()) == summary
    assert (summary.eager.threads, summary.compiled.threads) == (eager.environment.threads, 3)
    assert "and 3 (compiled)" in render_speedup(summary)


def test_the_page_states_the_terminals_headline_and_escapes_names() -> None:
    eager = drifting(run(1, rename={"act": "a<b>"}), 1.0)
    compiled = drifting(run(1, rename={"act": "a<b>"}), 0.5)
    summary = speedup_of(eager, compiled, paired=True).summary()
    page = render_speedup_html(summary)
    headline = headline_text(summary).removeprefix("iteration (median): ")
    assert html.escape(headline) in page or headline in page
    assert headline in render_speedup(summary)
    assert "a<b>" not in page and "a&lt;b&gt;" in page
    shown = page.split("</style>", 1)[1].split("<script>", 1)[0]  # the page's text, not its CSS
    assert "run-wide shift" in shown and "removed" not in shown
    assert "http://" not in page and "https://" not in page  # nothing from the network
