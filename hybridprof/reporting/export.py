"""CSV and JSON exports of the layer table (`session_frame`), one row/record per profiled path.

The JSON export is the table as records, not the session; the session file is `session.to_json()`.
"""

from __future__ import annotations

import json
import math

from hybridprof.datamodel import ProfileSession
from hybridprof.frames import STR_COLUMNS, session_frame

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


def render_json(session: ProfileSession) -> str:
    # NaN (not measured) becomes null: strict JSON has no NaN.
    records = session_frame(session).to_dict(orient="records")
    clean = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in records
    ]
    return json.dumps(clean, indent=1, default=_plain) + "\n"


def _plain(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    raise TypeError(f"cannot export {type(value).__name__} to JSON")


class CsvRenderer:
    extensions = (".csv",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_csv(session)


class JsonRenderer:
    extensions = (".json",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_json(session)
