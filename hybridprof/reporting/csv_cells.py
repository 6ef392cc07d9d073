"""The one CSV writer: every CSV hybridprof makes (the layer table, the comparison) goes through it.

Module and class names come from user models and session files, and a spreadsheet runs a cell that
starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(...)`, `=cmd|'/C calc'!A0`); a tab or
CR in front hides one. So every text cell starting with one of those gets a leading `'` (shown as
text); numbers stay numbers. Rows end in CRLF (RFC 4180), which also makes the csv module quote
every cell holding a CR or LF: a name with a line break stays in its cell instead of starting a
row of its own.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """The header and the rows as CSV text, every cell made safe (`safe_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([safe_cell(name) for name in header])
    writer.writerows([safe_cell(value) for value in row] for row in rows)
    return buffer.getvalue()


def safe_cell(value: object) -> object:
    """A text cell a spreadsheet would run as a formula prefixed with `'`; a missing value (None,
    NaN) empty; anything else as it is."""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


__all__ = ["FORMULA_STARTS", "csv_text", "safe_cell"]
