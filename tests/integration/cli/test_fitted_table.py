"""The printed table fits the terminal: the least telling columns are left out first (and said),
`--columns` chooses, `--sort` orders each level, module order by default; on a real run with
--backward --flops --profile-memory of a small transformer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from hybridprof.analysis.layer_table import LayerRow, layer_table
from hybridprof.api import profile
from hybridprof.cli import main
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import UsageError
from hybridprof.reporting.layer_columns import title as title_of
from hybridprof.reporting.text.fitted_table import (
    TableChoice,
    fitted_table,
    ordered_rows,
    printed,
    term_columns,
)
from hybridprof.reporting.text.text_report import render_text_report
from tests.wide_run import wide_session


@pytest.fixture(scope="module")
def wide() -> ProfileSession:
    return wide_session()


@pytest.fixture(scope="module")
def saved(wide: ProfileSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wide") / "wide.json"
    path.write_text(wide.to_json())
    return path


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("width", [120, 100, 80])
def test_the_table_fits_the_width_and_says_what_it_left_out(
    wide: ProfileSession, width: int
) -> None:
    full = fitted_table(wide, TableChoice())
    assert widest(full.text) > 150 and full.left_out == ()  # every column: far too wide
    fitted = fitted_table(wide, TableChoice(width=width))
    assert widest(fitted.text) <= width
    header = fitted.text.splitlines()[0]
    assert "Self CPU" in header  # never left out
    assert fitted.left_out and all(title not in header.split(" | ") for title in fitted.left_out)
    assert f"columns left out to fit {width} characters: " in "\n".join(fitted.notes())
    # the least telling go first: whatever is left out, the names and Self CPU stay
    assert header.split(" | ")[0].startswith("Module")


@pytest.mark.parametrize("width", [120, 100])
def test_room_left_by_a_wide_column_goes_to_narrower_ones(wide: ProfileSession, width: int) -> None:
    fitted = fitted_table(wide, TableChoice(width=width))
    table = layer_table(wide)
    titles = {title_of(printed(c).title, table): c.key for c in term_columns(table)}
    header = [cell.strip() for cell in fitted.text.splitlines()[0].split(" | ")][1:]
    kept = [titles[t] for t in header]
    for title in fitted.left_out:  # each one left out would not have fitted beside the rest
        order = [k for k in titles.values() if k in {*kept, titles[title]}]
        wider = fitted_table(wide, TableChoice(columns=tuple(order)))
        assert widest(wider.text) > width, title


def test_long_names_are_cut_in_the_middle_when_nothing_else_can_go(wide: ProfileSession) -> None:
    fitted = fitted_table(wide, TableChoice(width=40))
    names = [line.split(" | ")[0] for line in fitted.text.splitlines()[2:]]
    cut = [n for n in names if "…" in n]
    assert cut and all(len(n.rstrip()) <= 40 for n in names)


def test_columns_choose_exactly(wide: ProfileSession) -> None:
    chosen = fitted_table(wide, TableChoice(columns=("verdict", "self", "class"), width=60))
    header = [cell.strip() for cell in chosen.text.splitlines()[0].split(" | ")]
    assert header == ["Module", "Verdict", "Self CPU", "Class"]
    assert chosen.left_out == ()  # asked for: kept, wide or not
    forward_only = profile(nn.Sequential(nn.Linear(4, 4)), torch.rand(2, 4), warmup=0, iters=1)
    missing = fitted_table(forward_only, TableChoice(columns=("self", "bwd-self")))
    assert missing.missing == ("bwd-self",)
    assert "not measured in this run, so not shown: bwd-self" in missing.notes()
    with pytest.raises(UsageError, match="unknown column 'speed' for --columns"):
        fitted_table(wide, TableChoice(columns=("speed",)))


def test_module_order_by_default_and_sort_by_a_column(wide: ProfileSession) -> None:
    def order(table: str) -> list[str]:
        return [line.split(" | ")[0].strip() for line in table.splitlines()[2:]]

    default = fitted_table(wide, TableChoice())
    rows = order(default.text)
    assert rows.index("├── wte") < rows.index("├── h") < rows.index("└── lm_head")
    assert default.order.startswith("module order")
    table = layer_table(wide)
    for key, value in (("share", "pct_self"), ("self", "self_cpu")):
        ordered = ordered_rows(table.tree(), key, table)
        assert {r.path for r in ordered} == {r.path for r in table.tree()}  # the same rows
        for parent in {r.parent for r in ordered}:
            kids = [r for r in ordered if r.parent == parent]
            figures = [_figure(r, value) for r in kids]
            known = [f for f in figures if f is not None]
            assert known == sorted(known, reverse=True), (key, parent)  # largest first
            assert figures[: len(known)] == known  # rows without the figure come last
        seen: set[str] = set()
        for row in ordered:  # still a tree: every row under its parent
            assert row.parent is None or row.parent in seen
            seen.add(row.path)
    share = fitted_table(wide, TableChoice(sort="share"))
    assert share.order == "each level by Self %, largest first (the tree kept)"
    with pytest.raises(UsageError, match="unknown --sort 'fast'"):
        fitted_table(wide, TableChoice(sort="fast"))


def _figure(row: LayerRow, value: str) -> float | None:
    if value == "pct_self":
        return row.pct_self if row.measured else None
    return row.self_cpu.median if row.self_cpu else None


def test_report_prints_a_fitted_table_with_the_flops_total(
    saved: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["report", str(saved)]) == 0
    out = capsys.readouterr().out
    lines = out.split("\nrows: ")[0].splitlines()
    said = ("warning: ", "(outside modules) holds ")  # lines above and under it, not lined up
    table = "\n".join(line for line in lines if not line.startswith(said))
    assert widest(table) <= 120 and "Self CPU" in table.splitlines()[0]
    assert "columns left out to fit 120 characters" in out
    assert "FLOPs per step: " in out and " forward+backward (" in out
    assert main(["report", str(saved), "--columns", "class,self", "--sort", "self"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("Module"))
    assert [cell.strip() for cell in header.split(" | ")] == ["Module", "Class", "Self CPU"]
    assert "rows: each level by Self CPU, largest first" in out


def test_bad_columns_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", "--columns", "self,speed", "--iters", "1", "--out-dir", str(out)]
    assert main(argv) == 2
    assert "unknown column 'speed' for --columns" in capsys.readouterr().err
    assert not out.exists()


def test_the_text_report_says_the_flops_total(wide: ProfileSession) -> None:
    report = render_text_report(wide)
    assert report.splitlines()[1].startswith("FLOPs per step: ")
    assert "forward+backward" in report.splitlines()[1]
