"""The plain data the HTML and PDF templates display, built from a session (templates only
display).

Everything a template shows is decided here and can be tested without rendering: which rows, their
formatted numbers, heat, op breakdowns, findings, and the limits the PDF applies (stated in
`notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hybridprof.analysis.layer_table import LayerTable, layer_table
from hybridprof.analysis.tree import OPTIMIZER_ROW, outside_label
from hybridprof.datamodel import (
    FindingKind,
    OpStat,
    ProfileSession,
)
from hybridprof.reporting.findings import group_findings
from hybridprof.reporting.format import format_bytes, format_time_us
from hybridprof.reporting.page.charts import Chart, session_charts
from hybridprof.reporting.page.icicle import Icicle, icicles
from hybridprof.reporting.page.memory_view import MemoryView, memory_view
from hybridprof.reporting.page.ranks_view import RanksView, ranks_view
from hybridprof.reporting.page.roofline_view import RooflineView, roofline_view
from hybridprof.reporting.page.row_limits import heaviest_rows, opened
from hybridprof.reporting.page.tree_table import (
    Column,
    OpView,
    RowView,
    op_view,
    page_columns,
    row_view,
)
from hybridprof.reporting.text.text_table import outside_line
from hybridprof.reporting.trust import (
    INTERVAL_NOTE,
    has_intervals,
    headline_note,
    iterations_text,
    stability_text,
)

Mode = Literal["html", "pdf"]
PDF_MAX_ROWS = 200
PDF_OP_LAYERS = 10
PDF_MAX_OPS = 10
ORDER = {
    "html": "Rows in module order, as the model defines them; the tree opens along the path "
    "that takes the most time. Click a column's header to order each level by it, largest first "
    "(again: smallest first; Layer: module order again).",
    "pdf": "Rows in module order, as the model defines them.",
}


@dataclass(frozen=True, slots=True)
class HeaderItem:
    label: str
    value: str
    note: str = ""  # said as a footnote (and a tooltip): one figure in the header, not two


@dataclass(frozen=True, slots=True)
class FindingView:
    kind: str
    title: str
    path: str
    message: str
    where: str


@dataclass(frozen=True, slots=True)
class SourceView:
    path: str
    class_name: str
    where: str
    aliases: str


@dataclass(frozen=True, slots=True)
class StabilityView:
    """The verdict shown at the top of the report: "stable" or "noisy", and the sentence saying
    why."""

    verdict: str
    text: str


@dataclass(frozen=True, slots=True)
class ReportContext:
    mode: Mode
    title: str
    model_name: str
    created: str
    generator: str
    header: tuple[HeaderItem, ...]
    charts: tuple[Chart, ...]
    columns: tuple[Column, ...]  # the layer table's
    rows: tuple[RowView, ...]
    total_rows: int
    max_depth: int
    calls_title: str
    has_device: bool
    has_memory: bool
    has_backward: bool
    op_tables: tuple[tuple[RowView, tuple[OpView, ...]], ...]  # server-side op tables (PDF)
    findings: tuple[FindingView, ...]
    sources: tuple[SourceView, ...]
    compat: tuple[tuple[str, str, str], ...]
    warnings: tuple[str, ...]
    never_called: tuple[str, ...]
    notes: tuple[str, ...]
    order: str = ""  # the layer table's order, said above it
    outside: str = ""  # what the table's `(outside modules)` row holds, said right under it
    stability: StabilityView | None = None  # None for sessions saved before it was measured
    data: dict[str, Any] = field(default_factory=dict)  # for the page script, as |tojson
    roofline: RooflineView | None = None  # with --flops
    ranks: RanksView | None = None  # merged sessions of a torchrun run
    icicles: tuple[Icicle, ...] = ()  # the module tree by time, per pass
    memory: MemoryView | None = None  # --profile-memory: the step's peak, timeline, layers


def _header(session: ProfileSession, table: LayerTable) -> tuple[HeaderItem, ...]:
    env, plan = session.environment, session.plan
    runs = iterations_text(session)
    items = [
        ("Model file", session.model_file or plan.model_file or "-"),
        ("Entry", plan.entry or "-"),
        ("Root class", plan.root_class),
        ("Parameters", f"{_param_count(session):,}"),
        ("torch", env.torch_version),
        ("hybridprof", env.hybridprof_version),
        ("Python", env.python_version),
        ("Device", env.device),
        ("CPU", env.cpu),
        ("Threads", str(env.threads)),
        ("Strategy", session.strategy),
        ("Iterations", runs),
        *((("Steps", _steps_text(session)),) if session.steps or session.schedule else ()),
        ("Date", session.started_at or plan.created_at or "-"),
    ]
    from hybridprof.reporting.text.compiled_text import compile_header

    statistic = "the rows' sum" if table.summed else "median"
    total = f"{format_time_us(table.iteration_us)} per iteration ({statistic})"
    note = headline_note(table)
    return (
        *(HeaderItem(k, v) for k, v in [*items, *compile_header(session)]),
        HeaderItem("Total profiled time", total, note),
    )


def _steps_text(session: ProfileSession) -> str:
    """A training loop's steps: how many ran, and which the schedule measured."""
    text = f"{session.steps} in the block, {session.iterations} measured"
    plan = session.schedule
    if plan is not None:
        text += (
            f" (schedule: skip {plan.skip_first}, wait {plan.wait}, warm-up {plan.warmup}, "
            f"active {plan.active}, repeat {plan.repeat or 'until the end'})"
        )
    return text


def _stability(session: ProfileSession) -> StabilityView | None:
    stability = session.stability
    if stability is None:
        return None
    return StabilityView(stability.verdict, stability_text(stability))


def _param_count(session: ProfileSession) -> int:
    """The whole model's parameters: each module's own, summed over the tree (one row per object).

    A module's `param_count` counts only its own parameters (recurse=False), so summing every
    target counts each parameter once, profiled or not; without a plan, the records' sum.
    """
    if session.plan.targets:
        return sum(t.param_count for t in session.plan.targets)
    return sum(r.param_count for r in session.records)


def _findings(session: ProfileSession) -> tuple[FindingView, ...]:
    order = list(FindingKind)  # the enum's declaration order is the report's
    groups = sorted(
        group_findings(session.plan.findings), key=lambda g: order.index(g.finding.kind)
    )
    return tuple(
        FindingView(
            g.finding.kind.value,
            g.finding.kind.heading,
            g.paths_text(),
            g.finding.message,
            g.finding.span.short() if g.finding.span else "",
        )
        for g in groups
    )


def _sources(session: ProfileSession, paths: set[str]) -> tuple[SourceView, ...]:
    return tuple(
        SourceView(
            t.path, t.class_name, t.source.short() if t.source else "-", ", ".join(t.aliases)
        )
        for t in session.plan.targets
        if t.path in paths
    )


def _top_op_tables(
    rows: list[RowView], session: ProfileSession, n: int
) -> tuple[tuple[RowView, tuple[OpView, ...]], ...]:
    ops = _ops_by_row(session)
    with_ops = sorted((r for r in rows if r.path in ops), key=lambda r: -r.self_us)[:n]
    return tuple(
        (r, tuple(op_view(o) for o in _by_self_time(ops[r.path])[:PDF_MAX_OPS])) for r in with_ops
    )


def _ops_by_row(session: ProfileSession) -> dict[str, tuple[OpStat, ...]]:
    """Each row's ops by its path: the records', the optimizer row's and the outside row's (a
    module path has priority: a module may be named like the row)."""
    ops = {rec.path: rec.ops for rec in session.records if rec.ops}
    if session.optimizer is not None and session.optimizer.ops:
        ops.setdefault(OPTIMIZER_ROW, session.optimizer.ops)
    if session.outside_ops and session.outside_cpu_us is not None:
        ops.setdefault(outside_label(session), session.outside_ops)
    return ops


def _by_self_time(ops: tuple[OpStat, ...]) -> list[OpStat]:
    return sorted(ops, key=lambda o: -o.self_cpu_us)


def _js_data(session: ProfileSession) -> dict[str, Any]:
    # Compact arrays (not objects) keep a 10,000-layer report small; the page builds op tables
    # lazily. Device time and memory are formatted only when the table shows them.
    device, memory = session.use_device, session.profile_memory
    ops = {
        path: [
            [
                o.name,
                o.calls,
                format_time_us(o.self_cpu_us),
                format_time_us(o.total_cpu_us),
                format_time_us(o.self_device_us) if device else "",
                format_bytes(o.self_cpu_mem) if memory else "",
                o.backward,
            ]
            for o in _by_self_time(row_ops)
        ]
        for path, row_ops in _ops_by_row(session).items()
    }
    return {"ops": ops, "device": device, "memory": memory}


def _pdf_limits(
    rows: list[RowView], max_rows: int, op_layers: int
) -> tuple[list[RowView], list[str]]:
    """The rows the PDF shows and the notes that say what it left out (it has no JS to expand)."""
    kept, note = heaviest_rows(rows, max_rows)
    with_ops = sum(1 for r in rows if r.op_count)
    ops_note = (
        f"Op breakdowns are shown for the top {min(with_ops, op_layers)} of {with_ops} layers "
        f"by self CPU time (at most {PDF_MAX_OPS} ops each); the HTML report has all of them."
    )
    return kept, [n for n in (note, ops_note) if n]


def _row_views(table: LayerTable) -> list[RowView]:
    """Every row as the page places it: the tree in module order (opened along the heavy path),
    the optimizer's rows, then the outside row."""
    peak = max((r.self_cpu.median for r in table.layers() if r.self_cpu), default=0.0)
    rows = opened([row_view(r, peak) for r in table.tree()])
    rows += [row_view(r, peak) for r in table.optimizer()]
    outside = table.outside()
    return rows + ([row_view(outside, peak)] if outside is not None else [])


def _with_session_notes(notes: list[str], session: ProfileSession) -> list[str]:
    """The notes under the table: what ± means (when shown) first, the compile's last."""
    from hybridprof.reporting.text.compiled_text import compile_notes

    return [*([INTERVAL_NOTE] if has_intervals(session) else []), *notes, *compile_notes(session)]


def build_context(
    session: ProfileSession,
    mode: Mode = "html",
    pdf_max_rows: int = PDF_MAX_ROWS,
    pdf_op_layers: int = PDF_OP_LAYERS,
) -> ReportContext:
    """Everything the report shows. In "pdf" mode the table and op breakdowns are limited (see
    notes)."""
    table = layer_table(session)
    all_rows = _row_views(table)
    rows, notes = (
        _pdf_limits(all_rows, pdf_max_rows, pdf_op_layers) if mode == "pdf" else (all_rows, [])
    )
    notes = _with_session_notes(notes, session)
    plan = session.plan
    model_name = Path(session.model_file or plan.model_file or plan.root_class).name
    return ReportContext(
        mode=mode,
        title=f"hybridprof report: {plan.root_class} ({model_name})",
        model_name=f"{plan.root_class} ({model_name})",
        created=session.started_at or plan.created_at,
        generator=f"hybridprof {session.environment.hybridprof_version}",
        calls_title=session.calls_title(),
        header=_header(session, table),
        charts=session_charts(session),
        columns=page_columns(table, pdf=mode == "pdf"),
        rows=tuple(rows),
        total_rows=len(all_rows),
        max_depth=max((r.depth for r in all_rows), default=0),
        has_device=session.use_device,
        has_memory=session.profile_memory,
        has_backward=session.backward,
        op_tables=_top_op_tables(all_rows, session, pdf_op_layers) if mode == "pdf" else (),
        findings=_findings(session),
        sources=_sources(session, {r.path for r in rows}),
        compat=tuple((c.name, c.value, c.reason) for c in plan.compat),
        warnings=session.warnings,
        never_called=session.never_called,
        notes=tuple(notes),
        order=ORDER[mode],
        outside=outside_line(session) or "",
        stability=_stability(session),
        data=_js_data(session) if mode == "html" else {},
        roofline=roofline_view(session),
        ranks=ranks_view(session),
        icicles=icicles(all_rows, session.backward),
        memory=memory_view(session),
    )
