"""What `history show` lays out: the overview's order, the terminal's lines and sparklines, the
differential icicle's layout, and the page (self-contained, every name escaped) and its PDF."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from hybridprof.history.overview import HistoryOverview, overview, recent_regressions
from hybridprof.history.series import path_order, read_window
from hybridprof.history.store import open_store
from hybridprof.reporting.history.history_icicle import diff_icicle, tree_of
from hybridprof.reporting.history.history_page import (
    default_pair,
    page_data,
    render_history_page,
    render_history_pdf,
)
from hybridprof.reporting.history.history_text import render_history_text, sparkline
from tests.history_synthetic import fill_history, layer_paths, synthetic_history
from tests.sessions import HOSTILE


def view_of(tmp_path: Path, values: np.ndarray, paths: list[str] | None = None) -> HistoryOverview:
    db = tmp_path / "h.sqlite"
    fill_history(db, values, paths=paths)
    with open_store(db) as store:
        (series,) = store.all_series()
        window = read_window(store, series)
    return overview(str(db), window)


@pytest.fixture
def stepped(tmp_path: Path) -> tuple[HistoryOverview, int]:
    history = synthetic_history(0)
    return view_of(tmp_path, history.values), history.stepped


def test_the_layer_that_changed_comes_first_with_its_commit_range(
    stepped: tuple[HistoryOverview, int],
) -> None:
    view, row = stepped
    first = view.layers[0]
    assert first.row == row and len(first.code_changes) == 1
    change = first.code_changes[0]
    assert view.window.commits[change.step.index].rev == change.after_rev
    assert view.window.commits[change.step.last_before].rev == change.before_rev
    assert all(not layer.code_changes for layer in view.layers[1:])
    (env,) = view.environment
    assert abs(env.step.index - 20) <= 1


def test_the_terminal_lists_environment_then_changed_then_quiet_layers(
    stepped: tuple[HistoryOverview, int],
) -> None:
    view, _ = stepped
    lines = render_history_text(view)
    text = "\n".join(lines)
    assert lines[0].startswith(f"history {view.db}: net.py:Net on Test CPU")
    assert "commits 1-60 of 60" in lines[1]
    assert text.index("environment:") < text.index("layers with change points: 1 of 40")
    assert text.index("layers with change points") < text.index("layers without change points")
    changed = lines[lines.index(next(x for x in lines if "change points, newest" in x)) + 1]
    assert re.search(r"\+1\d\.\d% \[\+\d+\.\d%, \+\d+\.\d%\] at commit 3[789] ", changed)
    assert len(lines) < 30  # 15 quiet layers by default
    assert len(render_history_text(view, all_layers=True)) > 45


def test_sparklines() -> None:
    assert sparkline([1.0] * 5) == sparkline([1.0] * 5)[0] * 5
    assert sparkline([1.0, 1.0, 2.0, 2.0]) == "▁▁██"
    assert sparkline([1.0, float("nan"), 1.0]) == sparkline([1.0])[0] + " " + sparkline([1.0])[0]
    assert len(sparkline(list(range(100)))) == 40
    steady = sparkline([100.0, 101.0, 99.0, 100.5])  # 2% of noise is not stretched to 8 bars
    assert set(steady) <= set("▃▄▅▆")


def test_recent_regressions_fail_until_they_are_old_or_fixed(tmp_path: Path) -> None:
    values = synthetic_history(1, commits=40, environment_step=None, layer_step=None).values
    values[7, 36:] *= 1.4  # slower from commit 37 of 40
    view = view_of(tmp_path, values)
    (found,) = recent_regressions(view, ["*"], recent=5)
    assert found[0].row == 7 and found[1].step.index == 36
    assert recent_regressions(view, ["*"], recent=3) == []  # older than the last 3 commits
    assert recent_regressions(view, ["blocks.0.*"], recent=5) == []
    values[7, 38:] /= 1.4  # fixed two commits later
    (tmp_path / "fixed").mkdir()
    assert recent_regressions(view_of(tmp_path / "fixed", values), ["*"], recent=5) == []


def test_paths_sort_as_a_model_numbers_them() -> None:
    paths = ["blocks.10.fc", "blocks.2.fc", "", "blocks.2", "head"]
    assert sorted(paths, key=path_order) == ["", "blocks.2", "blocks.2.fc", "blocks.10.fc", "head"]
    assert tree_of(["blocks.1.fc"]) == ["", "blocks", "blocks.1", "blocks.1.fc"]


def test_the_differential_icicle_is_as_wide_as_the_new_commit_and_red_where_it_grew() -> None:
    paths = ["", "a.x", "a.y", "b"]
    blocks = {b.path: b for b in diff_icicle(paths, [10, 20, 30, 40], [10, 60, 30, 40], 5.0)}
    assert blocks[""].x1 == 1.0 and blocks[""].new_total_us == 140.0
    assert blocks["a"].color == "#c9ced6"  # a parent nobody profiled: grey
    assert blocks["a.x"].x1 - blocks["a.x"].x0 == pytest.approx(60 / 140)
    assert blocks["a.x"].color == "#d62728"  # +200%: the deepest red
    assert blocks["a.y"].color == "#f2f2f2"  # unchanged: pale
    assert blocks["b"].x0 == pytest.approx(90 / 140)  # after a's subtree; the root's own last
    quiet = diff_icicle(paths, [10, 20, 30, 40], [10, 23, 30, 40], 5.0, [None, 10.0, 0, 0])
    assert {b.path: b for b in quiet}["a.x"].color == "#f2f2f2"  # +15% within its noise


def test_a_chain_1000_deep_lays_out_without_recursion() -> None:
    path = ".".join(["m"] * 1000)
    blocks = diff_icicle([path], [1.0], [2.0], 5.0)
    assert len(blocks) == 1001 and max(b.depth for b in blocks) == 1000


def test_the_page_is_self_contained_and_escapes_every_name(tmp_path: Path) -> None:
    history = synthetic_history(4, layers=6)
    paths = [*layer_paths(5), f"{HOSTILE}:Evil</script><b>"]
    view = view_of(tmp_path, history.values, paths)
    page = render_history_page(view, "html")
    assert HOSTILE not in page and "</script><b>" not in page
    assert not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert "default-src 'none'" in page
    data = json.loads(re.search(r'id="hh-data">(.*?)</script>', page, re.S).group(1))
    assert HOSTILE in [node[0] for node in data["tree"]] and len(data["values"]) == 6
    assert data["pair"] == list(default_pair(view))
    assert page_data(view, 0, 1)["commits"][0][1] == "commit 1"


def test_the_pdf_holds_the_changed_layers_and_the_icicle(
    stepped: tuple[HistoryOverview, int],
) -> None:
    from pypdf import PdfReader

    view, row = stepped
    data = render_history_pdf(view)
    text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)
    assert view.window.paths[row] in text
    assert "Differential icicle" in text and "Environment" in text
    assert "more layers without change points are left out of the PDF" in text


def test_a_commit_measured_several_times_is_the_median_of_its_sessions(tmp_path: Path) -> None:
    from hybridprof.history.snapshot import LayerFigures, Snapshot
    from hybridprof.history.store import CommitRef
    from tests.history_synthetic import MACHINE

    db = tmp_path / "h.sqlite"
    with open_store(db, create=True) as store:
        for i, (rev, times) in enumerate(
            [("a", (10.0, 1.0)), ("a", (30.0, 3.0)), ("a", (20.0, float("nan"))), ("b", (5.0, 2.0))]
        ):
            layers = tuple(
                LayerFigures(p, "Linear", t)
                for p, t in zip(("x", "y"), times, strict=True)
                if t == t
            )
            snap = Snapshot(f"s{i}", "m", None, MACHINE, "", 5, None, "cpu", "stable", layers)
            store.add(snap, CommitRef(rev, committed_at=100 + (rev == "b")))
        window = read_window(store, store.all_series()[0])
    assert [c.sessions for c in window.commits] == [3, 1]
    assert window.self_us.tolist() == [[20.0, 5.0], [2.0, 2.0]]
