"""The plain data the HTML and PDF templates display, built from a session (templates only
display).

Everything a template shows is decided here and can be tested without rendering: which rows, their
formatted numbers, heat, op breakdowns, findings, and the limits the PDF applies (stated in
`notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hybridprof.analysis.layer_table import LayerRow, LayerTable, Timing, layer_table
from hybridprof.datamodel import (
    FindingKind,
    ModuleRecord,
    OpStat,
    ProfileSession,
)
from hybridprof.reporting.findings import group_findings
from hybridprof.reporting.format import format_bytes, format_calls, format_time_us
from hybridprof.reporting.page.charts import Chart, session_charts
from hybridprof.reporting.page.ranks import RanksView, ranks_view
from hybridprof.reporting.page.roofline_view import RooflineView, cells, roofline_view
from hybridprof.reporting.trust import (
    INTERVAL_NOTE,
    has_intervals,
    iterations_text,
    stability_text,
    timing_text,
)

Mode = Literal["html", "pdf"]
PDF_MAX_ROWS = 200
PDF_OP_LAYERS = 10
PDF_MAX_OPS = 10
HEAVY_SHARE = 50.0  # % of the iteration: a row this heavy is opened so its parts show
OPEN_ROWS = 30  # the HTML tree also opens a level while the rows shown stay this few


@dataclass(frozen=True, slots=True)
class HeaderItem:
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class OpView:
    name: str
    calls: int
    self_cpu: str
    total_cpu: str
    self_device: str
    memory: str
    backward: bool


@dataclass(frozen=True, slots=True)
class RowView:
    """One line of the tree table; raw numbers (for sorting) next to their formatted text."""

    path: str
    name: str
    depth: int
    parent: str | None
    class_name: str
    profiled: bool
    has_children: bool
    calls: float  # per iteration (as the times are)
    calls_text: str
    self_us: float
    total_us: float
    pct: float  # subtree (inclusive) share of the iteration, forward plus backward
    heat: int  # 0..5: self time relative to the heaviest row, for shading
    self_cpu: str
    total_cpu: str
    self_device: str
    total_device: str
    backward: str
    backward_total: str
    pct_text: str
    self_pct: float  # own share of the iteration: the rows' self shares add up to ~100%
    self_pct_text: str
    memory: str
    memory_bytes: int
    spread: str
    params: int
    output_shape: str
    source: str
    op_count: int
    flops: str = ""  # with --flops: the layer's FLOPs per step, achieved GFLOP/s, verdict
    gflops: str = ""
    verdict: str = ""
    derived: bool = False  # a container that never runs: its children's totals only
    outside: bool = False  # the row of time in no profiled module
    collapsed: bool = False  # the HTML tree opens with this row's children hidden
    self_device_us: float = 0.0  # raw numbers the HTML table sorts these columns by
    total_device_us: float = 0.0
    backward_us: float = 0.0
    backward_total_us: float = 0.0


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
    stability: StabilityView | None = None  # None for sessions saved before it was measured
    data: dict[str, Any] = field(default_factory=dict)  # for the page script, as |tojson
    roofline: RooflineView | None = None  # with --flops
    ranks: RanksView | None = None  # merged sessions of a torchrun run


def _dash(us: float | None) -> str:
    """A time a row has, or "-" where its quantity was not measured for it."""
    return "-" if us is None else format_time_us(us)


def _percent(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}%"


def _heat(self_us: float, peak: float) -> int:
    return 0 if peak <= 0 else min(5, int(6 * self_us / peak))


def _row_view(row: LayerRow, peak: float) -> RowView:
    """A layer table row as the page shows it (formatting only: every figure is the table's)."""
    own = row.kind == "layer"  # has calls and self figures of its own
    measured = row.record is not None  # a layer, or a container with its children's totals
    self_us = row.self_cpu.median if row.self_cpu else 0.0
    work = row.roofline
    flops, gflops, verdict = (
        cells(work) if work is not None and (measured or work.flops or work.bytes) else ("", "", "")
    )
    return RowView(
        path=row.path,
        name=row.name,
        depth=row.depth,
        parent=row.parent,
        class_name=row.class_name,
        profiled=measured,
        has_children=row.has_children,
        calls=row.calls_per_iteration or 0.0,
        calls_text=_calls_text(row) if own else "",
        self_us=self_us,
        total_us=row.total_cpu.median if row.total_cpu else 0.0,
        pct=row.pct_total or 0.0,
        heat=_heat(self_us, peak),
        self_cpu=timing_text(row.self_cpu),
        total_cpu=timing_text(row.total_cpu),
        self_device=_dash(row.self_device_us) if own else "",
        total_device=_dash(row.total_device_us) if measured else "",
        backward=_dash(row.backward_self_cpu_us) if own else "",
        backward_total=_dash(row.backward_total_cpu_us) if measured else "",
        pct_text=_percent(row.pct_total) if measured else "",
        self_pct=row.pct_self or 0.0,
        self_pct_text=_percent(row.pct_self) if own else "",
        memory=format_bytes(row.self_cpu_mem or 0) if own else "",
        memory_bytes=row.self_cpu_mem or 0,
        spread=_spread(row.self_cpu) if own and row.self_cpu else "",
        params=row.param_count,
        output_shape=", ".join(row.output_shapes),
        source=row.source.short() if row.source else "",
        op_count=row.op_count,
        flops=flops,
        gflops=gflops,
        verdict=verdict,
        derived=row.kind == "container",
        self_device_us=row.self_device_us or 0.0,
        total_device_us=row.total_device_us or 0.0,
        backward_us=row.backward_self_cpu_us or 0.0,
        backward_total_us=row.backward_total_cpu_us or 0.0,
    )


def _calls_text(row: LayerRow) -> str:
    calls = row.calls_per_iteration
    return "" if calls is None else format_calls(calls)


def _spread(timing: Timing) -> str:
    return f"{format_time_us(timing.min)}–{format_time_us(timing.max)}"


def _outside_view(row: LayerRow, peak: float) -> RowView:
    """The `(outside modules)` row: one amount, forward and backward together."""
    assert row.self_cpu is not None
    stat = row.self_cpu
    text = format_time_us(stat.median)
    return RowView(
        path=row.path, name=row.name, depth=0, parent=None, class_name="", profiled=True,
        has_children=False, calls=0.0, calls_text="", self_us=stat.median, total_us=stat.median,
        pct=row.pct_total or 0.0, heat=_heat(stat.median, peak), self_cpu=text, total_cpu=text,
        self_device="", total_device="", backward="", backward_total="",
        pct_text=_percent(row.pct_total), self_pct=row.pct_self or 0.0,
        self_pct_text=_percent(row.pct_self), memory="", memory_bytes=0, spread=_spread(stat),
        params=0, output_shape="", source="", op_count=0, outside=True,
    )  # fmt: skip


def heaviest_first(rows: list[RowView]) -> list[RowView]:
    """The same tree with each row's children ordered by their share (subtree time, forward plus
    backward), heaviest first; rows with no time keep their module order after them."""
    children: dict[str | None, list[RowView]] = {}
    for row in rows:
        children.setdefault(row.parent, []).append(row)
    ordered: list[RowView] = []

    def place(row: RowView) -> None:
        ordered.append(row)
        for child in sorted(children.get(row.path, []), key=lambda r: -r.pct):
            place(child)

    for top in sorted(children.get(None, []), key=lambda r: -r.pct):
        place(top)
    return ordered


def open_depth(rows: list[RowView]) -> int:
    """How deep the HTML tree opens: a level is opened while it holds a row with at least
    HEAVY_SHARE of the iteration (its parts are where the time goes) or while the rows shown stay
    within OPEN_ROWS; rows at the returned depth start collapsed."""
    deepest = max((r.depth for r in rows), default=0)
    depth = 0
    while depth < deepest:
        level = [r for r in rows if r.depth == depth and r.has_children]
        heavy = any(r.pct >= HEAVY_SHARE for r in level)
        shown = sum(1 for r in rows if r.depth <= depth + 1)
        if not heavy and shown > OPEN_ROWS:
            break
        depth += 1
    return depth


def _op_view(o: OpStat) -> OpView:
    return OpView(
        name=o.name,
        calls=o.calls,
        self_cpu=format_time_us(o.self_cpu_us),
        total_cpu=format_time_us(o.total_cpu_us),
        self_device=format_time_us(o.self_device_us),
        memory=format_bytes(o.self_cpu_mem),
        backward=o.backward,
    )


def _sorted_ops(rec: ModuleRecord) -> list[OpStat]:
    return sorted(rec.ops, key=lambda o: -o.self_cpu_us)


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
        ("Date", session.started_at or plan.created_at or "-"),
        ("Total profiled time", _total_time_text(table.iteration_us, table.shares_of_us)),
    ]
    from hybridprof.reporting.compiled_text import compile_header

    return tuple(HeaderItem(k, v) for k, v in [*items, *compile_header(session)])


def _stability(session: ProfileSession) -> StabilityView | None:
    stability = session.stability
    if stability is None:
        return None
    return StabilityView(stability.verdict, stability_text(stability))


def _total_time_text(median_us: float, shares_of: float) -> str:
    """The median iteration, and what the shares are of when that differs by more than 2%."""
    text = f"{format_time_us(median_us)} per iteration (median)"
    if median_us > 0 and abs(shares_of - median_us) > 0.02 * median_us:
        text += (
            f"; % columns are shares of {format_time_us(shares_of)}, the rows' medians summed "
            "(the iterations varied: pauses landed in different layers)"
        )
    return text


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


def _pdf_rows(rows: list[RowView], limit: int) -> tuple[list[RowView], str]:
    """All rows if they fit; else the heaviest profiled rows (by total CPU) with their ancestors.

    A depth cut would keep mostly unprofiled containers (the selection is usually the leaves), so
    the PDF keeps what costs time instead, in tree order so it still reads as a tree.
    """
    if len(rows) <= limit:
        return rows, ""
    by_path = {r.path: r for r in rows}
    kept: set[str] = set()
    shown = 0
    for row in sorted((r for r in rows if r.profiled), key=lambda r: -r.total_us):
        chain = _with_ancestors(row, by_path, kept)
        if len(kept) + len(chain) > limit:
            break
        kept.update(chain)
        shown += 1
    profiled = sum(1 for r in rows if r.profiled and not (r.derived or r.outside))
    note = (
        f"The table shows the {shown} heaviest of {profiled} profiled layers by total CPU time, "
        f"with their parents ({len(kept)} of {len(rows)} rows); the HTML report has all of them."
    )
    return [r for r in rows if r.path in kept], note


def _with_ancestors(row: RowView, by_path: dict[str, RowView], kept: set[str]) -> list[str]:
    """`row`'s path and those of its ancestors not yet kept."""
    chain: list[str] = []
    current: RowView | None = row
    while current is not None and current.path not in kept:
        chain.append(current.path)
        current = by_path.get(current.parent) if current.parent is not None else None
    return chain


def _top_op_tables(
    rows: list[RowView], session: ProfileSession, n: int
) -> tuple[tuple[RowView, tuple[OpView, ...]], ...]:
    with_ops = sorted((r for r in rows if r.op_count), key=lambda r: -r.self_us)[:n]
    by_path = {r.path: r for r in session.records}
    return tuple(
        (r, tuple(_op_view(o) for o in _sorted_ops(by_path[r.path])[:PDF_MAX_OPS]))
        for r in with_ops
    )


def _js_data(session: ProfileSession) -> dict[str, Any]:
    # Compact arrays (not objects) keep a 10,000-layer report small; the page builds op tables
    # lazily. Device time and memory are formatted only when the table shows them.
    device, memory = session.use_device, session.profile_memory
    ops = {
        rec.path: [
            [
                o.name,
                o.calls,
                format_time_us(o.self_cpu_us),
                format_time_us(o.total_cpu_us),
                format_time_us(o.self_device_us) if device else "",
                format_bytes(o.self_cpu_mem) if memory else "",
                o.backward,
            ]
            for o in _sorted_ops(rec)
        ]
        for rec in session.records
        if rec.ops
    }
    return {"ops": ops, "device": device, "memory": memory}


def _pdf_limits(
    rows: list[RowView], max_rows: int, op_layers: int
) -> tuple[list[RowView], list[str]]:
    """The rows the PDF shows and the notes that say what it left out (it has no JS to expand)."""
    kept, note = _pdf_rows(rows, max_rows)
    with_ops = sum(1 for r in rows if r.op_count)
    ops_note = (
        f"Op breakdowns are shown for the top {min(with_ops, op_layers)} of {with_ops} layers "
        f"by self CPU time (at most {PDF_MAX_OPS} ops each); the HTML report has all of them."
    )
    return kept, [n for n in (note, ops_note) if n]


def build_context(
    session: ProfileSession,
    mode: Mode = "html",
    pdf_max_rows: int = PDF_MAX_ROWS,
    pdf_op_layers: int = PDF_OP_LAYERS,
) -> ReportContext:
    """Everything the report shows. In "pdf" mode the table and op breakdowns are limited (see
    notes)."""
    table = layer_table(session)
    peak = max((r.self_cpu.median for r in table.layers() if r.self_cpu), default=0.0)
    all_rows = heaviest_first([_row_view(r, peak) for r in table.tree()])
    depth = open_depth(all_rows)
    all_rows = [
        replace(r, collapsed=True) if r.has_children and r.depth >= depth else r for r in all_rows
    ]
    outside = table.outside()
    if outside is not None:
        all_rows.append(_outside_view(outside, peak))
    rows, notes = (
        _pdf_limits(all_rows, pdf_max_rows, pdf_op_layers) if mode == "pdf" else (all_rows, [])
    )
    if has_intervals(session):
        notes = [INTERVAL_NOTE, *notes]
    from hybridprof.reporting.compiled_text import compile_notes

    notes = [*notes, *compile_notes(session)]
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
        stability=_stability(session),
        data=_js_data(session) if mode == "html" else {},
        roofline=roofline_view(session),
        ranks=ranks_view(session),
    )
