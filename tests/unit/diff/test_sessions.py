"""The comparison of two sessions (`hybridprof.diff`) on hand-made sessions of known deltas and
noise: matching, verdicts, the threshold, fairness warnings, the JSON round trip."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hybridprof.datamodel import (
    IterationSeries,
    ModuleRecord,
    OpStat,
    ProfileSession,
    Series,
    Stability,
    Stat,
)
from hybridprof.diff import (
    DiffResult,
    diff_series,
    diff_sessions,
    judge,
    match_records,
)
from hybridprof.reporting.diff_data import render_diff_csv
from hybridprof.reporting.text.diff_text import render_diff_text
from tests.sessions import ENV, _plan, _session, op, target

ITERS = 30


def noisy(center: float, rng: random.Random, spread: float = 0.02) -> list[float]:
    """ITERS values around `center`, uniform within ±spread, plus one slow outlier."""
    values = [center * (1 + rng.uniform(-spread, spread)) for _ in range(ITERS)]
    values[rng.randrange(ITERS)] = center * 1.5  # a timing hiccup, as real runs have
    return values


def layer(path: str, cls: str, center: float, rng: random.Random, **kw: object) -> ModuleRecord:
    values = noisy(center, rng)
    return ModuleRecord(
        path=path,
        class_name=cls,
        calls=ITERS,
        self_cpu_us=Stat.of(values),
        total_cpu_us=Stat.of(values),
        per_iteration=IterationSeries(self_cpu_us=Series.of(values)),
        ops=(op("aten::addmm" if cls == "Linear" else "aten::relu", 1, center, center),),
        input_shapes=kw.pop("input_shapes", ("4x64",)),  # type: ignore[arg-type]
        output_shapes=("4x64",),
        param_count=int(kw.pop("params", 4160 if cls == "Linear" else 0)),  # type: ignore[call-overload]
        **kw,  # type: ignore[arg-type]
    )


LAYERS = (("fc1", "Linear", 500.0), ("act", "ReLU", 50.0), ("fc2", "Linear", 300.0))


def run(
    seed: int,
    heavier: dict[str, float] | None = None,
    rename: dict[str, str] | None = None,
    **kw: object,
) -> ProfileSession:
    rng = random.Random(seed)
    heavier = heavier or {}
    rename = rename or {}
    records = tuple(layer(rename.get(p, p), c, t * heavier.get(p, 1.0), rng) for p, c, t in LAYERS)
    iteration = [
        sum(r.per_iteration.self_cpu_us.values[i] for r in records)  # type: ignore[union-attr]
        for i in range(ITERS)
    ]
    targets = tuple(target(r.path, r.class_name) for r in records)
    defaults: dict[str, object] = {
        "iterations": ITERS,
        "requested_iterations": ITERS,
        "iteration_cpu_us": tuple(iteration),
        "model_hash": "abc",
        "stability": Stability("stable", 0.02, 0.3, 1, ""),
    }
    defaults.update(kw)
    return _session(_plan("Net", targets), records, **defaults)


def test_same_model_twice_has_no_verdict_beyond_noise() -> None:
    diff = diff_sessions(run(1), run(2))
    assert [layer.verdict for layer in diff.layers] == ["within noise"] * 3
    assert diff.total.verdict == "within noise"
    assert not diff.has_regression()
    assert diff.warnings == ()
    assert any("unchanged" in n for n in diff.notes)


def test_heavier_layer_is_slower_and_first_others_within_noise() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}, model_hash="def"))
    first = diff.layers[0]
    assert (first.path, first.verdict) == ("fc2", "slower")
    change = first.change("self_cpu_us")
    assert change is not None and change.low is not None and change.high is not None
    assert 0 < change.low < 120.0 < change.high  # the true delta (300 us * 0.4) inside
    assert {layer.path: layer.verdict for layer in diff.layers[1:]} == {
        "fc1": "within noise",
        "act": "within noise",
    }
    assert diff.has_regression() and diff.total.verdict == "slower"
    assert first.ops and first.ops[0].name == "aten::addmm" and first.ops[0].status == "changed"
    assert any("changed" in n for n in diff.notes)


def test_faster_layer_is_an_improvement_not_a_regression() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc1": 0.6}))
    assert [(x.path, x.verdict) for x in diff.improvements()] == [("fc1", "faster")]
    assert diff.regressions() == ()


def test_change_under_the_threshold_is_never_a_regression() -> None:
    base = [100.0] * 20
    new = [103.0] * 20  # certainly slower, by 3%
    assert diff_series("x", base, new, 5.0).verdict == "within noise"
    assert diff_series("x", base, new, 2.0).verdict == "slower"
    assert judge(3.0, 1.0, 5.0, 100.0, 5.0) == "within noise"


def test_overlapping_noise_beyond_the_threshold_is_inconclusive_not_slower() -> None:
    base = [100.0, 150.0] * 10
    new = [110.0, 160.0] * 10  # medians 125 -> 135 (+8%), but the intervals overlap
    change = diff_series("x", base, new, 5.0)
    assert change.low is not None and change.low < 0 < (change.high or 0)
    # the interval (-40us to +60us) is wider than 5% and reaches a regression: it cannot tell
    assert change.verdict == "inconclusive"


def test_too_few_iterations_give_unknown_and_a_warning() -> None:
    base = run(1, iterations=5)
    short = tuple(
        replace(r, per_iteration=IterationSeries(Series(r.per_iteration.self_cpu_us.values[:5])))  # type: ignore[union-attr]
        for r in base.records
    )
    base = replace(base, records=short, iteration_cpu_us=base.iteration_cpu_us[:5])
    diff = diff_sessions(base, run(2, heavier={"fc2": 2.0}))
    assert {layer.verdict for layer in diff.layers} == {"unknown"}
    assert not diff.has_regression()
    assert any("too few" in w for w in diff.warnings)


def test_renamed_attribute_is_matched_by_class_and_shape() -> None:
    diff = diff_sessions(run(1), run(2, rename={"fc2": "head"}))
    renamed = next(x for x in diff.layers if x.new_path == "head")
    assert (renamed.base_path, renamed.match, renamed.verdict) == (
        "fc2",
        "class and shape",
        "within noise",
    )
    assert not [x for x in diff.layers if x.verdict in ("added", "removed")]
    assert "fc2 -> head" in render_diff_text(diff, all_layers=True)


def test_added_and_removed_layers_are_listed() -> None:
    rng = random.Random(3)
    base = run(1)
    extra = layer("extra", "Dropout", 20.0, rng)
    new = replace(run(2), records=(*run(2).records[:2], extra))  # fc2 gone, extra new
    diff = diff_sessions(base, new)
    verdicts = {x.path: (x.verdict, x.match) for x in diff.layers}
    assert verdicts["fc2"] == ("removed", "removed")
    assert verdicts["extra"] == ("added", "added")


def test_same_class_at_the_same_position_with_other_shapes() -> None:
    base = run(1)
    new = run(2, rename={"act": "gelu_like"})
    moved = replace(new.records[1], input_shapes=("4x128",), class_name="ReLU")
    new = replace(new, records=(new.records[0], moved, new.records[2]))
    pairs = match_records(base.records, new.records)
    assert ("act", "gelu_like", "class and position") in [
        (b.path if b else None, n.path if n else None, rule) for b, n, rule in pairs
    ]


def test_unfair_comparisons_warn_before_any_verdict() -> None:
    env214 = replace(ENV, torch_version="2.14.1+cpu", threads=4)
    new = replace(run(2, heavier={"fc2": 1.4}), environment=env214)
    noisy_base = run(1, stability=Stability("noisy", 0.3, 2.0, 1, "use --threads 1"))
    diff = diff_sessions(noisy_base, new)
    joined = " | ".join(diff.warnings)
    assert "torch version" in joined and "threads" in joined and "noisy" in joined
    text = render_diff_text(diff, verbose=True)
    assert text.index("WARNING") < text.index("SLOWER") and text.index("threads") < text.index(
        "whole iteration"
    )


def test_diff_result_round_trips_through_json() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}, rename={"act": "act2"}))
    again = DiffResult.from_json(diff.to_json())
    assert again == diff
    with pytest.raises(Exception, match="not a hybridprof-diff file"):
        DiffResult.from_json(run(1).to_json())


def test_csv_has_a_row_per_layer() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}))
    lines = render_diff_csv(diff).splitlines()
    assert lines[0].startswith("base_path,new_path,class,match,verdict,knock_on,self_cpu_us_base")
    assert len(lines) == 4 and lines[1].startswith("fc2,fc2,Linear,path,slower")


def test_html_escapes_names_puts_warnings_and_changed_layers_first(tmp_path: Path) -> None:
    from hybridprof.reporting import write_diff_report

    hostile = "<img src=x onerror=alert(1)>"
    base = run(1, rename={"act": hostile})
    env = replace(ENV, threads=4)
    new = replace(run(2, heavier={"fc2": 1.4}, rename={"act": hostile}), environment=env)
    out = write_diff_report(diff_sessions(base, new), tmp_path / "d.html")
    page = out.read_text()
    assert hostile not in page and "&lt;img src=x" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.index("different threads") < page.index("Whole iteration") < page.index("<svg")
    body = page[page.index("<tbody>") :]
    assert body.index("fc2") < body.index("fc1")  # the slower layer first
    assert "default-src 'none'" in page


def test_pdf_has_pages_with_both_identities(tmp_path: Path) -> None:
    pytest.importorskip("weasyprint")
    from hybridprof.reporting import write_diff_report

    out = write_diff_report(diff_sessions(run(1), run(2, heavier={"fc2": 1.4})), tmp_path / "d.pdf")
    assert out.read_bytes().startswith(b"%PDF")


def test_pdf_bar_chart_is_not_drawn_at_the_screens_width() -> None:
    """At the screen's 900px the chart filled a page of its own (11pt labels); on paper it takes
    at most 60% of the page's width, as laid out by weasyprint."""
    weasyprint = pytest.importorskip("weasyprint")
    from hybridprof.reporting.page.diff_context import render_diff_page

    page = render_diff_page(diff_sessions(run(1), run(2, heavier={"fc2": 1.4})), "pdf")
    first = weasyprint.HTML(string=page).render().pages[0]._page_box

    def boxes(box: Any) -> Iterator[Any]:
        yield box
        for child in getattr(box, "children", None) or []:
            yield from boxes(child)

    (figure, *_) = [b for b in boxes(first) if getattr(b, "element_tag", None) == "figure"]
    content_width = first.width - first.margin_left - first.margin_right
    assert figure.width / content_width <= 0.6, (figure.width, content_width)


def with_ops(session: ProfileSession, path: str, *ops: OpStat) -> ProfileSession:
    records = tuple(replace(r, ops=ops) if r.path == path else r for r in session.records)
    return replace(session, records=records)


def test_an_op_is_changed_only_beyond_noise() -> None:
    """An op of a slower layer that moved by 1% (or less than the floor) is the same; one that
    moved beyond the threshold and the floor, or ran more often, changed."""
    base = with_ops(
        run(1), "fc2", op("aten::addmm", 1, 280.0, 280.0), op("aten::t", 1, 2.0, 2.0),
        op("aten::view", 2, 1.0, 1.0), op("aten::copy_", 1, 10.0, 10.0),
    )  # fmt: skip
    new = with_ops(
        run(2, heavier={"fc2": 1.4}), "fc2", op("aten::addmm", 1, 392.0, 392.0),
        op("aten::t", 1, 2.02, 2.02), op("aten::view", 3, 1.5, 1.5),
        op("aten::copy_", 1, 13.0, 13.0),  # +30%, but 3 us: under the floor
    )  # fmt: skip
    diff = diff_sessions(base, new)  # the floor of saved sessions: 5 us
    fc2 = next(x for x in diff.layers if x.path == "fc2")
    assert fc2.verdict == "slower"
    assert {o.name: o.status for o in fc2.ops} == {
        "aten::addmm": "changed",
        "aten::t": "same",
        "aten::view": "changed",  # 3 calls instead of 2
        "aten::copy_": "same",
    }
    text = render_diff_text(diff, verbose=True)
    assert "aten::addmm: 280.000us x1 -> 392.000us x1 (changed)" in text
    assert "aten::t:" not in text  # the same op is not listed
