"""torchprof 1.4.0's README examples, run as written with only the import changed.

The code blocks below are copied from torchprof's README.md (tag v1.4.0; (c) 2019 Alexander W.
Wong, MIT License: see LICENSE in this folder). The quickstart moves the model to CUDA; on a
machine without CUDA it runs with its two `.cuda()` calls and `use_cuda=True` taken out (the only
other change), and unchanged where CUDA is (`test_quickstart_runs_unchanged_on_cuda`). The
`raw()` example continues the quickstart, as in the README.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

IMPORT = "import hybridprof.torchprof as torchprof"

QUICKSTART = """\
import torch
import torchvision
import torchprof

model = torchvision.models.alexnet(pretrained=False).cuda()
x = torch.rand([1, 3, 224, 224]).cuda()

# `profile_memory` was added in PyTorch 1.6, this will output a runtime warning if unsupported.
with torchprof.Profile(model, use_cuda=True, profile_memory=True) as prof:
    model(x)

# equivalent to `print(prof)` and `print(prof.display())`
print(prof.display(show_events=False))
"""

SHOW_EVENTS = """\
print(prof.display(show_events=True))
"""

RAW = """\
trace, event_lists_dict = prof.raw()
print(trace[2])
# Trace(path=('AlexNet', 'features', '0'), leaf=True, module=Conv2d(3, 64, kernel_size=(11, 11), stride=(4, 4), padding=(2, 2)))

print(event_lists_dict[trace[2].path][0])
"""

PATHS = """\
model = torchvision.models.alexnet(pretrained=False)
x = torch.rand([1, 3, 224, 224])

# Layer does not have to be a leaf layer
paths = [("AlexNet", "features", "3"), ("AlexNet", "classifier")]

with torchprof.Profile(model, paths=paths) as prof:
    model(x)

print(prof)
"""

TRACE_2 = (
    "Trace(path=('AlexNet', 'features', '0'), leaf=True, module=Conv2d(3, 64, "
    "kernel_size=(11, 11), stride=(4, 4), padding=(2, 2)))"
)


def with_import_changed(code: str) -> str:
    assert code.count("import torchprof\n") <= 1
    return code.replace("import torchprof\n", IMPORT + "\n")


def on_cpu(code: str) -> str:
    """The quickstart without CUDA: the only edits besides the import."""
    edited = code.replace(".cuda()", "").replace("use_cuda=True", "use_cuda=False")
    assert edited.count("use_cuda=False") == 1 and ".cuda()" not in edited
    return edited


def run(code: str, namespace: dict[str, object]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(with_import_changed(code), "<torchprof README>", "exec"), namespace)
    return out.getvalue()


def table_rows(text: str) -> dict[str, list[str]]:
    """Module name (tree drawing stripped) -> the other cells, for the body of a table."""
    rows = {}
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.split("|")]
        rows[cells[0].lstrip("│├└─ ")] = cells[1:]
    return rows


def test_quickstart_show_events_and_raw_examples() -> None:
    namespace: dict[str, object] = {}
    table = run(on_cpu(QUICKSTART), namespace)
    header = [h.strip() for h in table.splitlines()[0].split("|")]
    assert header == [
        "Module",
        "Self CPU total",
        "CPU total",
        "Self CPU Mem",
        "CPU Mem",
        "Number of Calls",
    ]
    rows = table_rows(table)
    assert rows["AlexNet"] == ["", "", "", "", ""]
    # a busy machine marks the with-block's times "(inflated)" (torch's threads outnumber the
    # free cores): a figure all the same
    figure = rows["0"][0].removesuffix(" (inflated)")
    assert rows["0"][-1] == "1" and figure.endswith(("us", "ms"))

    with_events = run(SHOW_EVENTS, namespace)
    assert "aten::conv2d" in with_events and "aten::clamp_min_" in with_events

    raw = run(RAW, namespace).splitlines()
    assert raw[0] == TRACE_2
    printed = "\n".join(raw[1:])
    assert "Name" in printed and "aten::mkldnn_convolution" in printed
    assert "Self CPU time total:" in printed and "CPU Mem" in printed


def test_paths_example_profiles_a_leaf_and_a_parent() -> None:
    namespace: dict[str, object] = {}
    run("import torch\nimport torchvision\nimport torchprof\n", namespace)
    rows = table_rows(run(PATHS, namespace))
    measured = {name for name, cells in rows.items() if cells[-1]}
    assert measured == {"3", "classifier"}
    assert rows["classifier"][-1] == "1"
    # torchprof printed every module; hybridprof prints the profiled ones and their ancestors.
    assert list(rows) == ["AlexNet", "features", "3", "classifier"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
def test_quickstart_runs_unchanged_on_cuda() -> None:
    namespace: dict[str, object] = {}
    table = run(QUICKSTART, namespace)
    assert "CUDA total" in table.splitlines()[0]
    assert run(RAW, namespace).splitlines()[0] == TRACE_2
