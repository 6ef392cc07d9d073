"""The registry of the layer table's columns (`reporting.layer_columns`): every format takes its
columns from it, and only from it."""

from __future__ import annotations

from collections import Counter

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.reporting.dataframe import COLUMNS, WHEN_MEASURED, frame_fields, session_frame
from hybridprof.reporting.layer_columns import BY_KEY, LAYER_COLUMNS, cell, page_cell
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.tree_table import PAGE_COLUMNS
from hybridprof.reporting.text.fitted_table import (
    COLUMN_KEYS,
    SORT_KEYS,
    TableChoice,
    fitted_table,
    term_columns,
)
from hybridprof.reporting.text.text_table import TEXT_COLUMNS, columns, render_text
from tests.memory_sessions import layer_memory_session
from tests.sessions import backward_session, device_session, small_session
from tests.unit.analysis.test_roofline import flops_session
from tests.unit.reporting.test_optimizer_rows import training_session


def test_each_column_and_each_frame_field_is_declared_once() -> None:
    assert [k for k, n in Counter(c.key for c in LAYER_COLUMNS).items() if n > 1] == []
    names = [f.name for c in LAYER_COLUMNS for f in c.frame]
    assert [n for n, count in Counter(names).items() if count > 1] == []


def test_every_format_chooses_its_columns_from_the_registry() -> None:
    assert all(BY_KEY[k].terminal is not None for k in COLUMN_KEYS)
    assert all(BY_KEY[k].text is not None for k in TEXT_COLUMNS)
    assert all(BY_KEY[k].page is not None for k in PAGE_COLUMNS)
    assert set(COLUMNS) <= {f.name for c in LAYER_COLUMNS for f in c.frame}
    assert set(WHEN_MEASURED) <= set(BY_KEY)
    # what --sort offers: the printed columns with a figure to order by
    assert SORT_KEYS[2:] == tuple(k for k in COLUMN_KEYS if BY_KEY[k].sort is not None)


@pytest.mark.parametrize(
    "make", [small_session, backward_session, device_session, layer_memory_session, flops_session]
)
def test_a_session_shows_the_columns_it_measured_in_every_format(make: object) -> None:
    session = make()  # type: ignore[operator]
    table = layer_table(session)
    measured = {c.key for c in LAYER_COLUMNS if c.present(table)}
    assert {c.key for c in term_columns(table)} == measured & set(COLUMN_KEYS)
    assert {c.key for c in columns(table)} == measured & set(TEXT_COLUMNS)
    assert {c.key for c in build_context(session).columns} == measured & set(PAGE_COLUMNS)
    frame = session_frame(session)
    assert list(frame.columns) == [f.name for f in frame_fields(table)]


def test_the_formats_show_one_figure_alike() -> None:
    session = backward_session()
    table = layer_table(session)
    fc1 = next(r for r in table.rows if r.path == "fc1")
    figure = cell(BY_KEY["bwd-self"], fc1)
    assert figure == page_cell(BY_KEY["bwd-self"], fc1) == "1.040ms"
    assert figure in render_text(session)
    assert figure in fitted_table(session, TableChoice(columns=("bwd-self",))).text
    assert session_frame(session).set_index("path").loc["fc1", "backward_self_cpu_us"] == 1040.0


def test_the_page_tells_not_measured_from_not_such_a_row() -> None:
    table = layer_table(training_session())
    rows = {r.path: r for r in table.rows}
    column = BY_KEY["bwd-total"]
    part = rows["(optimizer).zero_grad"]  # a part of the optimizer: measured, no backward total
    assert part.backward_total_cpu_us is None and page_cell(column, part) == "-"
    outside = table.outside()
    assert outside is not None and page_cell(column, outside) == ""  # no such figure there
    assert cell(column, part) == cell(column, outside) == ""  # the text tables: empty both
