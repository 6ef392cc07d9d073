"""The layer table as CSV (`session_frame`), one row per profiled path."""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.dataframe import STR_COLUMNS, session_frame

# A spreadsheet evaluates a cell that starts with one of these as a formula (`=HYPERLINK(...)`,
# `@SUM(...)`); module names come from user models and session files.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def render_csv(session: ProfileSession) -> str:
    frame = session_frame(session)
    for column in STR_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].map(defused_cell)
    text: str = frame.to_csv(index=False, lineterminator="\n")
    return text


def defused_cell(value: object) -> object:
    """A text cell a spreadsheet would run as a formula, prefixed with `'` so it shows as text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class CsvRenderer:
    extensions = (".csv",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_csv(session)
