"""The torchprof-style text table, against golden files built from hand-made sessions.

Regenerate the golden files (after a deliberate format change) with
`HYBRIDPROF_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/unit/reporting/text/test_text_table.py`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest

from hybridprof.datamodel import (
    Environment,
    ModuleRecord,
    ModuleTarget,
    OpStat,
    ProfilePlan,
    ProfileSession,
    Stat,
)
from hybridprof.reporting.text.text_table import render_text
from tests.paths import GOLDEN

REGENERATE = os.environ.get("HYBRIDPROF_REGEN_GOLDEN") == "1"

ENV = Environment("0.1.0", "2.13.0+cpu", "3.11.9", "Linux", "Test CPU", 1, "cpu")


def _target(path: str, cls: str, leaf: bool) -> ModuleTarget:
    depth = 0 if path == "" else path.count(".") + 1
    return ModuleTarget(path, cls, f"torch.nn.{cls}", depth, leaf, leaf, "leaf" if leaf else "")


def _record(
    path: str, cls: str, self_us: float, total_us: float, calls: int = 1, **kw: Any
) -> ModuleRecord:
    return ModuleRecord(
        path, cls, calls, Stat(self_us, self_us, self_us), Stat(total_us, total_us, total_us), **kw
    )


TARGETS = (
    _target("", "Net", False),
    _target("features", "Sequential", False),
    _target("features.0", "Conv2d", True),
    _target("features.1", "ReLU", True),
    _target("classifier", "Sequential", False),
    _target("classifier.0", "Linear", True),
)
OPS = (
    OpStat("aten::mkldnn_convolution", 1, 1650.5, 1700.0, self_cpu_mem=0, cpu_mem=774400),
    OpStat("aten::conv2d", 1, 31.25, 1832.0, self_cpu_mem=0, cpu_mem=774400),
    OpStat("aten::empty", 2, 48.0, 48.0, self_cpu_mem=774400, cpu_mem=774400),
)
RECORDS = (
    _record("features.0", "Conv2d", 1832.0, 1832.0, self_cpu_mem=774400, cpu_mem=774400, ops=OPS),
    _record("features.1", "ReLU", 77.76, 77.76, calls=3),
    _record("classifier.0", "Linear", 2_500_000.0, 2_500_000.0, self_cpu_mem=-2048, cpu_mem=512),
)


def session(**fields: Any) -> ProfileSession:
    plan = ProfilePlan(root_class="Net", targets=TARGETS)
    return ProfileSession(plan=plan, environment=ENV, records=RECORDS, strategy="session", **fields)


def with_device(s: ProfileSession) -> ProfileSession:
    records = tuple(
        replace(
            r,
            self_device_us=Stat(10.0, 9.0, 11.0),
            total_device_us=Stat(20.5, 20.0, 21.0),
            device_mem=4096,
            self_device_mem=1024,
        )
        for r in s.records
    )
    return replace(s, records=records, use_device=True)


CASES = {
    "text_basic": lambda: render_text(session()),
    "text_memory_events": lambda: render_text(session(profile_memory=True), show_events=True),
    "text_device_memory": lambda: render_text(with_device(session(profile_memory=True))),
    "text_depth1": lambda: render_text(session(), max_depth=1),
    "text_backward_iterations": lambda: render_text(backward_iterations()),
}


def backward_iterations() -> ProfileSession:
    """A `run --backward --iters 4` session: calls per iteration, backward columns."""
    s = session()
    records = tuple(
        replace(
            r,
            calls=4 * r.calls,
            backward_self_cpu_us=Stat.of([2 * r.self_cpu_us.median]),
            backward_total_cpu_us=Stat.of([2 * r.total_cpu_us.median]),
        )
        for r in s.records
    )
    return replace(s, records=records, iterations=4, requested_iterations=4, backward=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_golden(name: str) -> None:
    text = CASES[name]()
    golden = GOLDEN / f"{name}.txt"
    if REGENERATE:
        golden.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == golden.read_text(encoding="utf-8")


def test_columns_appear_only_when_measured() -> None:
    basic = render_text(session()).splitlines()[0]
    assert "Mem" not in basic and "CUDA" not in basic
    assert basic.split(" | ")[-1].strip() == "Number of Calls"
    full = render_text(with_device(session(profile_memory=True))).splitlines()[0]
    titles = [t.strip() for t in full.split(" | ")]
    assert titles == [
        "Module",
        "Self CPU total",
        "CPU total",
        "Self CUDA total",
        "CUDA total",
        "Self CPU Mem",
        "CPU Mem",
        "Self CUDA Mem",
        "CUDA Mem",
        "Number of Calls",
    ]


def test_units_and_tree() -> None:
    text = render_text(session())
    assert "1.832ms" in text and "77.760us" in text and "2.500s" in text
    lines = text.splitlines()
    assert lines[2].startswith("Net ") and lines[3].startswith("├── features")
    assert lines[4].startswith("│   ├── 0") and lines[5].startswith("│   └── 1")
    assert lines[6].startswith("└── classifier") and lines[7].startswith("    └── 0")


def test_events_follow_their_layer() -> None:
    lines = render_text(session(profile_memory=True), show_events=True).splitlines()
    conv = next(i for i, line in enumerate(lines) if line.startswith("│   ├── 0"))
    assert [line.split("|")[0].strip(" │") for line in lines[conv + 1 : conv + 4]] == [
        "aten::mkldnn_convolution",  # heaviest first
        "aten::empty",
        "aten::conv2d",
    ]
    assert "-2.00 KB" in lines[-1]


def test_text_report_file_carries_run_line_ops_and_warnings() -> None:
    from hybridprof.reporting.text.text_report import render_text_report

    s = replace(
        session(),
        warnings=("TransformerEncoder's fast path skipped every selected layer",),
        never_called=("classifier.9",),
    )
    text = render_text_report(s)
    assert text.splitlines()[0].startswith("hybridprof 0.1.0: Net (")
    assert render_text(s, show_events=True) in text
    assert "selected but never called: classifier.9" in text
    assert "- TransformerEncoder's fast path skipped every selected layer" in text


def test_backward_events_sit_under_the_backward_columns_and_long_names_are_cut() -> None:
    """After a training step `display(show_events=True)` lists each layer's backward ops too:
    their times go under the backward columns, and an autograd event's long name is cut in the
    middle so the name column stays narrow."""
    from tests.sessions import backward_session, op

    session = backward_session()
    long_name = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
    records = tuple(
        replace(
            r,
            ops=(op("aten::addmm", 1, 11.0, 12.0), op(long_name, 2, 33.0, 44.0, bwd=True)),
        )
        if r.path == "fc1"
        else r
        for r in session.records
    )
    text = str(render_text(replace(session, records=records), show_events=True))
    header, *lines = text.splitlines()
    titles = [t.strip() for t in header.split(" | ")]
    forward = next(line for line in lines if "aten::addmm" in line)
    backward = next(line for line in lines if "AccumulateGrad" in line)
    cells = [c.strip() for c in backward.split(" | ")]
    assert cells[titles.index("Self CPU total")] == ""
    assert cells[titles.index("Self CPU (backward)")] == "33.000us"
    assert cells[titles.index("CPU total (backward)")] == "44.000us"
    fwd = [c.strip() for c in forward.split(" | ")]
    assert fwd[titles.index("Self CPU total")] == "11.000us"
    assert fwd[titles.index("Self CPU (backward)")] == ""
    assert "autograd::engine::evalu…" in cells[0] and cells[0].endswith("AccumulateGrad")
    assert len(cells[0]) <= 4 + 4 + 48


def test_a_layer_lists_its_heaviest_ops_and_a_row_for_the_rest() -> None:
    """A training step's layer runs 20 or more ops: the table lists the heaviest `max_events`
    and one `... K more ops (time)` row per pass whose self cells hold the rest's sum (so the
    column adds up), its total cells empty (ops nest); max_events=None lists every op."""
    from tests.sessions import backward_session, op

    session = backward_session()
    forward = tuple(op(f"aten::f{i:02d}", 1, 20.0 - i, 30.0) for i in range(12))
    backward = tuple(op(f"aten::b{i:02d}", 2, 10.0 - i, 40.0, bwd=True) for i in range(6))
    records = tuple(
        replace(r, ops=forward + backward) if r.path == "fc1" else r for r in session.records
    )
    session = replace(session, records=records)
    header, *lines = str(render_text(session, show_events=True, max_events=4)).splitlines()
    titles = [t.strip() for t in header.split(" | ")]
    ops = [line for line in lines if any(k in line for k in ("aten::f", "aten::b", "more "))]
    assert [line.split("|")[0].strip(" │") for line in ops] == [
        "aten::f00",
        "aten::f01",
        "aten::f02",
        "aten::f03",
        "... 8 more ops (100.000us)",
        "... 6 more backward ops (45.000us)",
    ]
    rest, rest_bwd = ([c.strip() for c in line.split(" | ")] for line in ops[-2:])
    assert rest[titles.index("Self CPU total")] == "100.000us"  # 16 + 15 + ... + 9
    assert rest[titles.index("CPU total")] == ""
    assert rest_bwd[titles.index("Self CPU (backward)")] == "45.000us"
    assert rest_bwd[titles.index("CPU total (backward)")] == ""
    assert rest_bwd[titles.index("Self CPU total")] == ""
    every = str(render_text(session, show_events=True, max_events=None))
    assert all(o.name in every for o in forward + backward) and "more ops" not in every
    from hybridprof.reporting.text.text_report import render_text_report

    assert every in render_text_report(session)  # the .txt report lists every op
