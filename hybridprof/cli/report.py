"""Re-render a saved session (or a comparison saved by `diff --report x.json`) as HTML, PDF, text,
CSV or JSON (no torch, no profiling).

The format follows each output's extension; without -o (or with -o -) the tree table is printed.

examples:
  hybridprof report hybridprof-out/session.json -o report.pdf
  hybridprof report session.json -o layers.csv -o layers.html --force
  hybridprof report session.json --show-events --max-depth 2
  hybridprof report session.json --show-events --max-events 0   # every op of every layer
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hybridprof.analysis.op_list import MAX_EVENTS
from hybridprof.cli.common import (
    add_common_options,
    add_table_options,
    check_pdf_support,
    command_parser,
    guarded,
    parse_or_exit_code,
    table_choice,
)
from hybridprof.cli.destinations import check_outputs, is_stdout
from hybridprof.cli.terminal import emit
from hybridprof.datamodel import ProfileSession
from hybridprof.diff import DiffResult
from hybridprof.diff.speedup import SpeedupSummary
from hybridprof.errors import UsageError
from hybridprof.reporting import (
    known_extensions,
    renderer_for,
    speedup_renderer_for,
    write_diff_report,
    write_report,
    write_speedup_report,
)
from hybridprof.reporting.text.fitted_table import TableChoice


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("report", __doc__)
    parser.add_argument("session", help="a session file saved by hybridprof run")
    parser.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="FILE",
        help="write the report here, repeatable; format by extension: "
        + " ".join(known_extensions())
        + "; - prints the table (default: print the table)",
    )
    parser.add_argument(
        "--show-events", action="store_true", help="printed table: one row per op under each layer"
    )
    parser.add_argument(
        "--max-events",
        type=int,
        default=MAX_EVENTS,
        metavar="N",
        help="printed table with --show-events: each layer's N heaviest ops, the rest in one "
        f"'... K more ops' row per pass; 0 lists every op (default: {MAX_EVENTS})",
    )
    parser.add_argument(
        "--max-depth",
        type=int,
        metavar="N",
        help="printed table: deepest tree level shown (default: all)",
    )
    add_table_options(parser)
    add_common_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else render(args)

    return guarded(body, "--debug" in argv)


def render(args: argparse.Namespace) -> int:
    """Check every output first, then read the session, then write each report."""
    if args.max_depth is not None and args.max_depth < 0:
        raise UsageError(f"--max-depth must be 0 (the root only) or more, got {args.max_depth}")
    if args.max_events < 0:
        raise UsageError(f"--max-events must be 0 (every op) or more, got {args.max_events}")
    files = [Path(o) for o in args.output if not is_stdout(o)]
    choice = table_choice(args)
    for output in files:
        renderer_for(output)  # a known format, and its renderer importable
    check_outputs(files, (), args.force, [Path(args.session)])
    check_pdf_support(files)
    from hybridprof.files.storage import load_session_or_diff

    printed = not files or len(files) < len(args.output)  # no -o, or -o - among them
    session = load_session_or_diff(args.session)
    if isinstance(session, DiffResult):
        return render_saved_diff(session, files, printed, args.force)
    if isinstance(session, SpeedupSummary):
        return render_saved_speedup(session, files, printed, args.force)
    if printed:
        max_events = args.max_events or None  # 0: every op
        emit(printed_lines(session, choice, args.show_events, args.max_depth, max_events))
    for output in files:
        written = write_report(session, output, force=args.force)
        emit([f"report: {written}"])
    return 0


def printed_lines(
    session: ProfileSession,
    choice: TableChoice,
    show_events: bool,
    max_depth: int | None,
    max_events: int | None = MAX_EVENTS,
) -> list[str]:
    """What `report` prints of a session: a noisy run's warning above the table, the table fitted
    to the terminal, what to know of it, the FLOPs and verdicts of a --flops run, the ranks."""
    from hybridprof.cli.terminal import roofline_lines
    from hybridprof.reporting.text.fitted_table import fitted_table
    from hybridprof.reporting.text.ranks_text import rank_lines
    from hybridprof.reporting.trust import stability_line

    fitted = fitted_table(
        session, choice, show_events=show_events, max_depth=max_depth, max_events=max_events
    )
    noisy = stability_line(session)
    above = [f"warning: {noisy}"] if noisy else []
    return [
        *above,
        fitted.text,
        *fitted.under,
        *fitted.notes(),
        *roofline_lines(session),
        *rank_lines(session),
    ]


def render_saved_diff(diff: DiffResult, outputs: list[Path], printed: bool, force: bool) -> int:
    """A comparison saved by `hybridprof diff --report x.json`, printed or written again."""
    if printed:
        from hybridprof.reporting.text.diff_text import render_diff_text

        emit([render_diff_text(diff).rstrip("\n")])
    for output in outputs:
        written = write_diff_report(diff, output, force=force)
        emit([f"report: {written}"])
    return 0


def render_saved_speedup(
    summary: SpeedupSummary, outputs: list[Path], printed: bool, force: bool
) -> int:
    """An eager-vs-compiled comparison (`run --compare-eager`'s compare.json), printed or written
    again as .html, .json or .txt."""
    for output in outputs:
        speedup_renderer_for(output)  # every format known before any file is written
    if printed:
        from hybridprof.reporting.text.speedup_text import render_speedup

        emit([render_speedup(summary).rstrip("\n")])
    for output in outputs:
        written = write_speedup_report(summary, output, force=force)
        emit([f"report: {written}"])
    return 0
