"""What `hybridprof run` prints when done: a tree table that fits a terminal, and output lines.

A big model's full table scrolls away and says little, so past `TABLE_ROWS` rows the table keeps
the heaviest layers (by self CPU time, forward plus backward), each under its ancestors, with a
`... N more` row where the others stood, so the tree still reads; the reports hold every layer.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table, stated_session
from hybridprof.analysis.tree import heaviest_with_ancestors
from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.format import visible
from hybridprof.reporting.trust import stability_line

if TYPE_CHECKING:
    from hybridprof.reporting.text.fitted_table import TableChoice

# The lines of the tree a terminal shows whole (a screen: a 4-block GPT's 47 rows fit); a bigger
# tree keeps its heaviest layers with their parents and says where the others were.
TABLE_ROWS = 60


def _heaviest_first(table: LayerTable) -> list[LayerRow]:
    return sorted(table.layers(), key=lambda r: -_own_us(r))


def _own_us(row: LayerRow) -> float:
    """What the printed table ranks layers by: own time, forward plus backward."""
    return row.own_us


def terminal_table(
    session: ProfileSession, choice: TableChoice | None = None, rows: int = TABLE_ROWS
) -> list[str]:
    """The table's lines: a noisy run's warning above it, the table (fitted to the terminal, the
    heaviest layers of a big model), and what to know of it (order, what was left out)."""
    from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table

    choice = choice or TableChoice()
    table = layer_table(session)
    rows -= len(table.optimizer())  # the optimizer's lines, always shown
    if table.outside() is not None:
        rows -= 1  # the (outside modules) line
    noisy = stability_line(session)
    above = [f"warning: {noisy}"] if noisy else []
    below = [never_ran] if (never_ran := never_ran_line(session)) else []
    if len(table.tree()) <= rows:
        fitted = fitted_table(session, choice)
        return [*above, fitted.text, *fitted.under, *below, *fitted.notes()]
    # The heaviest layers under their ancestors, a `... N more` row where others were; the
    # whole session, its rows cut: a container's total still sums all its children.
    shown, keep = heaviest_with_ancestors(table.tree(), table.layers(), _own_us, rows)
    fitted = fitted_table(session, choice, only=keep)
    note = (
        f"(the {len(shown)} heaviest of {len(table.layers())} profiled layers by self CPU time, "
        "with their parents; '... N more' stands for rows left out; the report lists every layer)"
    )
    return [*above, fitted.text, *fitted.under, note, *below, *fitted.notes()]


NEVER_RAN_NAMED = 5


def never_ran_line(session: ProfileSession) -> str:
    """The selected layers no measured iteration called (they have no row), each with where its
    parent's `__init__` makes it: left over, or used another way; "" when every one ran."""
    if not session.never_called:
        return ""
    targets = {t.path: t for t in session.plan.targets}
    named = []
    for path in session.never_called[:NEVER_RAN_NAMED]:
        target = targets.get(path)
        where = target.source if target is not None else None
        place = f", {Path(where.file).name}:{where.line}" if where is not None else ""
        named.append(f"{path} ({target.class_name if target else '?'}{place})")
    more = len(session.never_called) - len(named)
    return (
        "never ran (selected, 0 calls; no row): "
        + ", ".join(named)
        + (f" and {more} more (the report lists them)" if more > 0 else "")
    )


def summary_line(session: ProfileSession) -> str:
    """One line under the table: what was run, how long a step took, and the heaviest layers."""
    from hybridprof.reporting.format import format_time_us
    from hybridprof.reporting.trust import iterations_text

    table = layer_table(session)
    top = _heaviest_first(table)[:3]
    tops = ", ".join(f"{r.path or '(root)'} {format_time_us(r.own_us)}" for r in top)
    tops = tops or "none (no selected layer ran; see the warning)"
    kind = "training step" if session.backward else "forward"
    kind += "" if session.iterations == 1 else "s"
    return (
        f"{session.iterations} measured {kind}, {_headline_text(session, table)} "
        f"(iterations: {iterations_text(session)}; {wall_time(session.duration_s)} in all), "
        f"strategy {session.strategy}; "
        f"heaviest: {tops}"
    )


def _headline_text(session: ProfileSession, table: LayerTable) -> str:
    """The headline as the summary says it: the rows' sum, or the measured median iteration
    with its interval where the rows cannot add up to the iteration (no outside time)."""
    from hybridprof.datamodel import Series
    from hybridprof.reporting.format import format_time_us
    from hybridprof.reporting.trust import time_with_interval

    if table.summed:
        return f"{format_time_us(table.iteration_us)} profiled CPU each, the rows' sum"
    step = time_with_interval(table.measured_iteration_us, Series.of(session.iteration_cpu_us))
    return f"median {step} profiled CPU each"


def headline_lines(session: ProfileSession) -> list[str]:
    """The lines under the summary that say which statistic the table is, and the measured
    median iteration where it is not the headline."""
    from hybridprof.reporting.trust import headline_gap_line, statistic_line

    table = layer_table(session)
    return [line for line in (statistic_line(table), headline_gap_line(table)) if line]


def where_lines(
    session: ProfileSession,
    session_file: Path | None,
    reports: Sequence[Path],
    trace: Path | None,
    traced_iterations: int = 0,
    notes: Sequence[str] = (),
) -> list[str]:
    """The lines under the table: the summary, where each file went, `notes` (how the run ran),
    and the run's warnings."""
    from hybridprof.reporting.text.compiled_text import compile_lines
    from hybridprof.reporting.text.memory_text import memory_lines

    lines = [
        summary_line(session),
        *headline_lines(session),
        *([TRAIN_MODE_LINE] if session.backward else []),
        *roofline_lines(session),
        *memory_lines(session),
        *compile_lines(session),
    ]
    if session_file is not None:
        lines.append(
            f"session: {session_file}  (re-render: hybridprof report {session_file} -o FILE)"
        )
    lines += [f"report:  {r}" for r in reports]
    if trace is not None:
        plural = "s" if traced_iterations > 1 else ""
        lines.append(
            f"trace:   {trace}  (the first {traced_iterations} measured iteration{plural}; "
            "open in https://ui.perfetto.dev or chrome://tracing)"
        )
    lines += notes
    # An interruption is said once, on stderr, with where the partial session went.
    warnings = [w for w in session.warnings if not (session.interrupted and _is_interruption(w))]
    # The noise verdict is said once, above the table (terminal_table), not here again.
    lines += [f"warning: {w}" for w in warnings]
    return [visible(line) for line in lines]  # a newline in a name or path cannot forge a line


TRAIN_MODE_LINE = (
    "training step: the model ran in train mode (Dropout active, BatchNorm on each batch's "
    "statistics), as a backward pass needs, whatever mode build_model left it in; its mode, "
    "weights, buffers and gradients are put back after"
)


def _is_interruption(warning: str) -> bool:
    return warning.startswith("interrupted after ")


def wall_time(seconds: float) -> str:
    """2.4 s, or 38 ms for a fast model (never "0.0 s")."""
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.001 else "under 1 ms"


def emit(lines: Iterable[str]) -> None:
    """Print to stdout; a reader that went away (`| head`) ends the printing, not the command.

    Control characters (in module names from a model or a session file) are shown escaped, so
    they cannot recolour the terminal, retitle it or rewrite a line.
    """
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to print
        return
    try:
        for line in lines:
            print(visible(line, newlines=True))
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


VERDICT_LAYERS = 5


def roofline_lines(session: ProfileSession) -> list[str]:
    """With --flops: the peak, then the verdicts of the heaviest layers and what was not counted."""
    from hybridprof.analysis.roofline import NOT_COUNTED, by_path, inconsistencies
    from hybridprof.reporting.format import flops_total_text, format_count, peak_text

    if session.flops is None:
        return []
    work = session.flops
    rooflines = by_path(stated_session(session))  # the table's times
    lines = [f"{flops_total_text(session)}; {peak_text(work.peak)}"]
    judged = [r for r in _heaviest_first(layer_table(session)) if r.path in rooflines]
    for row in judged[:VERDICT_LAYERS]:
        line = rooflines[row.path]
        figures = (
            f"no FLOP formula for {line.not_counted}"
            if line.verdict == NOT_COUNTED
            else f"{format_count(line.flops, 'FLOP')}, {line.intensity or 0:.3g} FLOP/byte"
        )
        lines.append(f"  {row.path or '(root)'}: {line.verdict or 'not timed'} ({figures})")
    lines += [f"  inconsistent: {x.text}" for x in inconsistencies(stated_session(session))]
    skipped = sorted({o.name for w in work.layers for o in w.not_counted})
    if skipped:
        shown = ", ".join(skipped[:6]) + (
            f" and {len(skipped) - 6} more" if len(skipped) > 6 else ""
        )
        lines.append(f"  not counted (no FLOP formula): {shown}")
    return lines
