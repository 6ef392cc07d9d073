"""Names from models and files are printed escaped in every line hybridprof prints: a newline in a
name cannot forge an output line, and bidi, tag and other invisible characters are shown as
escapes."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from hybridprof.analysis.rank_merge import merge_sessions
from hybridprof.cli.terminal import where_lines
from hybridprof.datamodel import ProfileSession, RankInfo, RankRun
from hybridprof.diff import diff_sessions
from hybridprof.reporting.format import visible
from hybridprof.reporting.text.diff_text import render_diff_text
from hybridprof.reporting.text.plan_text import render_plan
from hybridprof.reporting.text.ranks_text import rank_lines
from hybridprof.reporting.text.text_table import render_text
from tests.sessions import small_session

HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\u061c\U000e0000-\U000e007f\r]")
NAMES = ["a\nFORGED name line", "b\u202eevil", "c\U000e0041\U000e0042tag", "d\u2066iso\u061c"]


def hostile() -> ProfileSession:
    """small_session whose three leaves and their classes carry the hostile names."""
    session = small_session()
    rename = dict(zip((r.path for r in session.records), NAMES, strict=False))
    records = tuple(
        replace(r, path=rename[r.path], class_name=rename[r.path] + "Cls") for r in session.records
    )
    targets = tuple(
        replace(t, path=rename[t.path], class_name=rename[t.path] + "Cls")
        if t.path in rename
        else t
        for t in session.plan.targets
    )
    return replace(
        session,
        records=records,
        plan=replace(session.plan, targets=targets),
        warnings=("layer a\nFORGED warning never ran",),
    )


def assert_inert(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert not [line for line in text.splitlines() if line.startswith("FORGED")], text
    assert not HIDDEN.findall(text), sorted({f"U+{ord(c):04X}" for c in HIDDEN.findall(text)})


def test_tag_bidi_and_arabic_marks_are_escaped() -> None:
    assert visible("c\U000e0041tag\u061c\u180e") == "c\\U000e0041tag\\u061c\\u180e"
    assert visible("a\nb") == "a\\nb" and visible("a\nb", newlines=True) == "a\nb"


def test_run_s_last_lines_print_names_escaped() -> None:
    session = hostile()
    assert_inert(where_lines(session, Path("out\nFORGED.json"), [Path("r\nFORGED.html")], None))
    assert_inert([render_text(session)])


def test_the_plan_prints_names_escaped() -> None:
    assert_inert(render_plan(hostile().plan).splitlines())


def test_the_comparison_prints_names_escaped() -> None:
    session = hostile()
    assert_inert(render_diff_text(diff_sessions(session, session), all_layers=True).splitlines())


@pytest.mark.parametrize("field", ["host", "device", "backend"])
def test_rank_lines_print_names_escaped(field: str) -> None:
    ranks = []
    for rank in (0, 1):
        info = replace(RankInfo(rank, 2, rank, "h", "gloo", "cpu"), **{field: "x\nFORGED\u202e"})
        ranks.append(replace(hostile(), rank=RankRun(info, (1.0,) * 3, (0.0,) * 3)))
    assert_inert(rank_lines(merge_sessions(ranks)))


def test_the_txt_report_prints_names_escaped() -> None:
    from hybridprof.reporting.text.text_report import render_text_report

    session = replace(hostile(), never_called=("x\nFORGED never called",))
    session = replace(session, plan=replace(session.plan, root_class="Net\nFORGED root"))
    assert_inert(render_text_report(session).splitlines())
