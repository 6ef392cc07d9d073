"""Every CSV hybridprof writes (the layer table, the comparison) is safe in a spreadsheet: text
cells never start a formula, and a CR or LF in a name never splits a row."""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridprof.datamodel import ProfileSession
from hybridprof.diff import diff_sessions
from hybridprof.reporting.csv_cells import csv_text, safe_cell
from hybridprof.reporting.dataframe import render_csv, session_frame
from hybridprof.reporting.diff_data import render_diff_csv
from tests.paths import ROOT
from tests.sessions import small_session

PACKAGE = ROOT / "hybridprof"
# What a spreadsheet (Excel, LibreOffice, Google Sheets) runs as a formula, stated here rather than
# taken from the product's list: a start dropped from the product must fail these tests.
SPREADSHEET_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Each cell as written, and as the CSV must hold it.
EXPECTED_CELLS = [
    ("=HYPERLINK(1+2)", "'=HYPERLINK(1+2)"),
    ("+1+2", "'+1+2"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("@", "'@"),
    ("\t=1+2", "'\t=1+2"),
    ("\r=1+2", "'\r=1+2"),
    ("a@b", "a@b"),
    ("sum=1", "sum=1"),
    ("blocks.0", "blocks.0"),
    ("", ""),
]
# Names as a hostile model or session file has them: formula starts, CR, LF, tabs, quotes, commas.
NAMES = st.text(alphabet=st.sampled_from('=+-@\t\r\n",;a1 |!(){}'), min_size=1, max_size=12)


def named(names: list[str], classes: list[str]) -> ProfileSession:
    """small_session with its three leaves renamed (paths without dots: each stays a child)."""
    session = small_session()
    paths = {r.path: n.replace(".", "_") for r, n in zip(session.records, names, strict=True)}
    kinds = {r.path: c for r, c in zip(session.records, classes, strict=True)}
    records = tuple(
        replace(r, path=paths[r.path], class_name=kinds[r.path]) for r in session.records
    )
    targets = tuple(
        replace(t, path=paths[t.path], class_name=kinds[t.path]) if t.path in paths else t
        for t in session.plan.targets
    )
    return replace(session, records=records, plan=replace(session.plan, targets=targets))


def spreadsheet_rows(text: str) -> list[list[str]]:
    """The rows as a spreadsheet reads them (quotes respected, a bare CR ends a row)."""
    return list(csv.reader(io.StringIO(text, newline="")))


def assert_safe(rows: list[list[str]], expected_rows: int) -> None:
    assert len(rows) == expected_rows
    assert {len(row) for row in rows} == {len(rows[0])}
    for cell in (c for row in rows for c in row):
        assert not cell.startswith(SPREADSHEET_FORMULA_STARTS) or _number(cell), cell


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(NAMES, min_size=3, max_size=3, unique=True),
    classes=st.lists(NAMES, min_size=3, max_size=3),
)
def test_the_layer_table_csv_neutralises_and_quotes_every_name(
    names: list[str], classes: list[str]
) -> None:
    session = named(names, classes)
    frame = session_frame(session)
    rows = spreadsheet_rows(render_csv(session))
    assert_safe(rows, len(frame) + 1)
    header = rows[0]
    paths = [row[header.index("path")] for row in rows[1:]]
    assert [safe_cell(p) for p in frame["path"]] == paths  # each name round-trips, 'd or as is


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(NAMES, min_size=3, max_size=3, unique=True),
    classes=st.lists(NAMES, min_size=3, max_size=3),
)
def test_the_comparison_csv_neutralises_and_quotes_every_name(
    names: list[str], classes: list[str]
) -> None:
    session = named(names, classes)
    diff = diff_sessions(session, session)
    rows = spreadsheet_rows(render_diff_csv(diff))
    assert_safe(rows, len(diff.layers) + 1)
    header = rows[0]
    classes_seen = {row[header.index("class")] for row in rows[1:]}
    assert classes_seen == {safe_cell(layer.class_name) for layer in diff.layers}


def test_every_formula_start_gets_a_quote_and_nothing_else_does() -> None:
    for written, expected in EXPECTED_CELLS:
        assert safe_cell(written) == expected, (written, safe_cell(written))
    text = csv_text(["path", "class"], [["@SUM(A1:A9)", "@cmd"], ["=1", "Linear"]])
    assert spreadsheet_rows(text) == [
        ["path", "class"],
        ["'@SUM(A1:A9)", "'@cmd"],
        ["'=1", "Linear"],
    ]


def test_numbers_stay_numbers_and_missing_values_are_empty() -> None:
    text = csv_text(["a", "b", "c", "d"], [[-1.5, None, float("nan"), "-1.5"]])
    assert text == "a,b,c,d\r\n-1.5,,,'-1.5\r\n"


def test_no_other_module_writes_csv() -> None:
    # one writer for every CSV the product makes: nothing else imports csv or calls to_csv
    writers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            imports_csv = isinstance(node, ast.Import) and any(a.name == "csv" for a in node.names)
            calls_to_csv = isinstance(node, ast.Attribute) and node.attr == "to_csv"
            if imports_csv or calls_to_csv:
                writers.append(path.relative_to(PACKAGE).as_posix())
    assert writers == ["reporting/csv_cells.py"]
