"""The .txt report: a line on the run, the layer table with each layer's ops, the roofline table
with --flops, the memory section with --profile-memory, then what to know (warnings, never-called
paths, ranks)."""

from __future__ import annotations

from hybridprof.analysis.layer_table import layer_table, stated_session
from hybridprof.analysis.roofline import inconsistencies, session_rooflines, unattributed_flops
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.format import (
    flops_total_text,
    format_count,
    format_rate,
    peak_text,
    visible,
)
from hybridprof.reporting.text.memory_text import memory_section
from hybridprof.reporting.text.ranks_text import rank_lines
from hybridprof.reporting.text.text_table import format_table, render_text
from hybridprof.reporting.trust import (
    INTERVAL_NOTE,
    compensation_text,
    has_intervals,
    iterations_text,
    stability_text,
    statistic_text,
)


def render_text_report(session: ProfileSession) -> str:
    """The .txt report: a line on the run, the table with each layer's ops, then what to know.

    Unlike `render_text` (torchprof's `str(prof)`), a report file must stand alone, so it also says
    what ran and carries the warnings and never-called paths the HTML report shows.
    """
    plan, env = session.plan, session.environment
    lines = [
        f"hybridprof {env.hybridprof_version}: {plan.root_class} "
        f"({session.model_file or plan.model_file or 'library'}), strategy {session.strategy}, "
        f"iterations: {iterations_text(session)}, torch {env.torch_version}, {env.device}, "
        f"{env.threads} thread(s)",
        *([flops_total_text(session)] if session.flops is not None else []),
    ]
    if session.stability is not None:
        stability = session.stability
        lines.append(f"stability: {stability.verdict}: {stability_text(stability)}")
    # A file is searched, not read on one screen: it lists every op of every layer.
    table = layer_table(session)
    if table.compensated:  # which figures are the headline, and why, in one line
        lines.append(f"times: compensated{compensation_text(table)}")
    if table.typical_steps is not None:
        lines.append(f"each row is {statistic_text(table)}")
    # A compensated table's raw times beside its own: the file says what was measured too.
    every_op = render_text(session, show_events=True, max_events=None, raw=True)
    lines += ["", every_op, *roofline_section(session)]
    lines += memory_section(session)
    if session.compiled is not None:
        from hybridprof.reporting.text.compiled_text import compile_lines

        lines += ["", *compile_lines(session)]
    if has_intervals(session):
        lines += ["", INTERVAL_NOTE]
    if session.ranks is not None:
        lines += ["", *rank_lines(session)]
    if session.never_called:
        lines += ["", "selected but never called: " + ", ".join(map(visible, session.never_called))]
    if session.warnings:
        lines += ["", "warnings:", *(f"- {visible(w)}" for w in session.warnings)]
    # The tables escape their cells; a name in the other lines must not break its line either.
    lines[0] = visible(lines[0])
    return "\n".join(visible(line, newlines=True) for line in lines) + "\n"


def roofline_section(session: ProfileSession) -> list[str]:
    """The .txt report's roofline table: every layer with counted work, with what was not
    counted."""
    work = session.flops
    if work is None:
        return []
    body = [
        [
            x.path or "(root)",
            format_count(x.flops, "FLOP"),
            format_count(x.bytes, "B"),
            format_rate(x.intensity, ""),
            format_rate(x.gflops, ""),
            format_rate(x.pct_peak, "%"),
            x.verdict if x.self_us is not None else "(not profiled)",
            x.not_counted,
        ]
        for x in session_rooflines(stated_session(session))  # the table's times
        if x.self_us is not None or x.flops or x.bytes or x.not_counted
    ]
    header = ["Layer", "FLOPs", "Bytes", "FLOP/B", "GFLOP/s", "% peak", "Verdict", "Not counted"]
    outside = unattributed_flops(session)
    return [
        "",
        flops_total_text(session),
        f"roofline, self figures per step ({peak_text(work.peak)}):",
        format_table(header, body),
        f"counted in one extra pass ({work.pass_s:.2f} s) by a {work.method}"
        + (f"; {format_count(outside, 'FLOP')} outside the model" if outside else ""),
        *(f"inconsistent: {x.text}" for x in inconsistencies(stated_session(session))),
    ]


class TextRenderer:
    """torchprof-style text table with op rows, warnings and never-called paths."""

    extensions = (".txt",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_text_report(session)
