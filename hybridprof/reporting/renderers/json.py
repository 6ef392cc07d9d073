"""The layer table as JSON records (one per profiled path); the session file itself is
`session.to_json()`."""

from __future__ import annotations

import json
import math

from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.dataframe import session_frame


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


class JsonRenderer:
    extensions = (".json",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_json(session)
