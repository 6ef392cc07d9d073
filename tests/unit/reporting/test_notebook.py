"""The notebook view of hand-made sessions: framed, escaped, bounded, plugged in from above."""

from __future__ import annotations

import html
import re
import subprocess
import sys

from hybridprof.reporting import install_views
from hybridprof.reporting.notebook import notebook_page, session_html
from tests.report_page import page_data, page_ops, page_rows
from tests.sessions import HOSTILE, big_session, hostile_session, small_session


def framed(output: str) -> str:
    match = re.fullmatch(r'<iframe [^>]*srcdoc="([^"]*)"></iframe>', output)
    assert match, output[:200]
    return html.unescape(match.group(1))


def test_the_view_is_the_report_page_in_a_sandboxed_frame() -> None:
    session = small_session()
    output = session_html(session)
    assert 'sandbox="allow-scripts"' in output and "allow-same-origin" not in output
    page = framed(output)
    assert page == notebook_page(session)
    assert '<table id="layers" class="tree">' in page and "Content-Security-Policy" in page
    assert "#tree { order: 1; }" in page  # the table first in the small frame


def test_hostile_names_stay_text_through_the_frame() -> None:
    output = session_html(hostile_session())
    assert "<img" not in output and "<b>" not in output  # nothing outside the frame is markup
    page = framed(output)
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and HOSTILE not in page.split("<script")[0]


def test_a_large_session_is_cut_to_the_heaviest_rows_with_a_note() -> None:
    page = notebook_page(big_session(leaves=500), max_rows=120)
    rows = list(page_rows(page))
    assert len(rows) <= 120 and len(rows) >= 100
    assert "heaviest" in page and "write_report" in page
    ops = page_ops(page)
    assert {path for path in rows if path.count(".") == 3 and "…" not in path} <= set(ops)
    assert any(path.endswith("…") for path in rows)  # a '... N more' row where rows were cut
    assert set(ops) <= set(rows)  # op data only for the rows shown
    assert {s[0] for s in page_data(page)["sources"]} <= set(rows) | {"(root)"}


def test_a_small_session_is_not_cut() -> None:
    page = notebook_page(small_session(), max_rows=200)
    assert "heaviest" not in page


def test_the_data_model_has_views_only_once_reporting_plugs_them_in() -> None:
    # In a fresh interpreter: the data model alone has no views (layers point down) ...
    code = (
        "from tests.sessions import small_session\n"
        "from hybridprof.errors import UsageError\n"
        "s = small_session()\n"
        "assert s._repr_html_() is None\n"
        "try:\n"
        "    s.to_dataframe()\n"
        "    raise AssertionError('a DataFrame without the reporting layer')\n"
        "except UsageError as e:\n"
        "    assert 'import hybridprof.reporting' in str(e)\n"
        "import hybridprof\n"
        "hybridprof.load_session\n"  # ... and the facade plugs in the report's views
        "assert s._repr_html_().startswith('<iframe')\n"
        "assert list(s.to_dataframe().path) == [r.path for r in s.records]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    install_views()
    assert small_session()._repr_html_() == session_html(small_session())
