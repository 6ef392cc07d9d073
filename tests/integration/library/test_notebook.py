"""A real notebook, executed headless (nbclient + ipykernel): profiles show inline as HTML."""

from __future__ import annotations

import html
import re
from typing import Any

import nbclient
import nbformat
import pytest

from tests.report_page import page_rows

pytestmark = pytest.mark.slow

CELLS = [
    # 0: profile the bundled AlexNet, as the README does
    "import torch, hybridprof\n"
    "torch.set_num_threads(1)\n"
    "model = hybridprof.examples.alexnet()\n"
    "x = torch.rand(1, 3, 224, 224)\n"
    "with hybridprof.Profile(model, profile_memory=True) as prof:\n"
    "    model(x)",
    "prof",  # 1: the Profile shows inline
    "prof.session()",  # 2: so does its session, in the same notebook
    # 3: a model with more rows than a notebook shows
    "from torch import nn\n"
    "wide = nn.Sequential(*[nn.Linear(4, 4) for _ in range(300)])\n"
    "with hybridprof.Profile(wide) as big:\n"
    "    wide(torch.rand(1, 4))\n"
    "big",
    "hybridprof.Profile(model)",  # 4: nothing profiled yet: text only
    "prof.display(show_events=True)",  # 5: the table with ops, as text
    "session = prof.session()\nprint(session)\nrepr(session)",  # 6: printed: the table
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    folder = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    nbformat.write(notebook, folder / "profile.ipynb")
    return notebook


def html_of(cell: Any) -> str:
    (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return str(result.data.get("text/html", ""))


def framed_page(output: str) -> str:
    """The report page inside the output's iframe (srcdoc, unescaped)."""
    match = re.fullmatch(r'<iframe [^>]*srcdoc="([^"]*)"></iframe>', output)
    assert match, output[:200]
    return html.unescape(match.group(1))


def test_the_profile_shows_the_interactive_table_inline(executed: Any) -> None:
    output = html_of(executed.cells[1])
    assert (
        output.startswith('<iframe class="hybridprof-view"') and 'sandbox="allow-scripts"' in output
    )
    page = framed_page(output)
    assert '<table id="layers" class="tree">' in page
    assert {"features.0", "classifier.6"} <= set(page_rows(page))  # the rows the page draws
    assert 'id="filter"' in page and "button" in page  # the controls of the interactive table
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)=\"https?:", page)  # nothing loaded from the network
    assert "aten::conv2d" in page  # op tables (built by the page's script from its data)


def test_two_outputs_in_one_notebook_are_separate_frames(executed: Any) -> None:
    first, second = html_of(executed.cells[1]), html_of(executed.cells[2])
    assert first.count("<iframe") == 1 and second.count("<iframe") == 1
    assert "features.0" in page_rows(framed_page(second))
    assert "<script" not in first.split("srcdoc=")[0]  # no script outside the frame


def test_a_large_model_is_cut_with_a_note(executed: Any) -> None:
    page = framed_page(html_of(executed.cells[3]))
    # at most 200 lines: the rows kept and a `... N more` line per run of rows left out, so how
    # many rows fit depends on how the heaviest of 300 like layers lie (timing noise): at least
    # half, when runs of one row left out alternate with rows kept
    assert 100 <= len(page_rows(page)) <= 200
    assert "of 300 profiled layers" in page and "write_report" in page


def test_an_unprofiled_profile_shows_as_text(executed: Any) -> None:
    (result,) = [o for o in executed.cells[4].outputs if o.output_type == "execute_result"]
    assert "text/html" not in result.data
    assert "nothing profiled" in result.data["text/plain"]


def test_no_cell_raised(executed: Any) -> None:
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in executed.cells)


def text_of(cell: Any) -> str:
    (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return str(result.data["text/plain"])


def test_display_shows_as_the_table_not_a_quoted_string(executed: Any) -> None:
    shown = text_of(executed.cells[5])
    assert shown.startswith("Module ") and "\\n" not in shown and shown[0] not in "'\""
    assert "├── features" in shown and "aten::conv2d" in shown  # real lines, ops under layers


def test_a_printed_session_is_its_table_and_its_repr_one_line(executed: Any) -> None:
    (printed,) = [o.text for o in executed.cells[6].outputs if o.output_type == "stream"]
    assert printed.startswith("Module ") and "(outside profiled modules)" in printed
    shown = text_of(executed.cells[6])
    assert shown.startswith("'<ProfileSession of AlexNet: ") and "\\n" not in shown
    assert len(shown) < 200
