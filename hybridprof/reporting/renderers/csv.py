"""The layer table as CSV (`session_frame`), one row per profiled path."""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.csv_cells import csv_text
from hybridprof.reporting.dataframe import session_frame


def render_csv(session: ProfileSession) -> str:
    frame = session_frame(session)
    return csv_text(list(frame.columns), frame.itertuples(index=False, name=None))


class CsvRenderer:
    extensions = (".csv",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_csv(session)
