"""Merge the sessions of a torchrun run's ranks into one session and report (no torch needed).

Rank 0 does this at the end of `hybridprof run` under torchrun; this command does it offline, e.g.
after an interrupted run or on session-rank*.json files copied from several hosts. The merged
session holds each layer's median/min/max across ranks, the slowest rank, stragglers, and each
rank's step time and communication; `hybridprof report` renders it like any session.

examples:
  hybridprof merge runs/ddp/session-rank*.json --report merged.html
  hybridprof merge session-rank0.json session-rank1.json -o merged.json --report merged.pdf
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence
from pathlib import Path

from hybridprof.cli.common import (
    add_common_options,
    check_pdf_support,
    command_parser,
    guarded,
    parse_or_exit_code,
    terminal_width,
)
from hybridprof.cli.destinations import check_outputs
from hybridprof.cli.terminal import emit, terminal_table
from hybridprof.datamodel import ProfileSession
from hybridprof.files.outputs import write_atomic
from hybridprof.reporting import known_extensions, renderer_for, write_report
from hybridprof.reporting.format import visible
from hybridprof.reporting.text.fitted_table import TableChoice
from hybridprof.reporting.text.ranks_text import rank_lines


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("merge", __doc__)
    parser.add_argument("sessions", nargs="+", help="every rank's session-rank*.json")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="save the merged session (JSON) here (default: not saved; the table is printed)",
    )
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report of the merged session, repeatable; the format follows the "
        "extension: " + " ".join(known_extensions()) + " (default: none)",
    )
    add_common_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else merge(args)

    return guarded(body, "--debug" in argv)


def merge(args: argparse.Namespace) -> int:
    """Check the outputs, read and merge the sessions, write and print."""
    from hybridprof.analysis.rank_merge import merge_sessions
    from hybridprof.files.storage import load_session

    output = Path(args.output) if args.output else None
    reports = tuple(Path(r) for r in args.report)
    for report in reports:
        renderer_for(report)
    outputs = [p for p in (output, *reports) if p is not None]
    check_outputs(outputs, (), args.force, [Path(s) for s in args.sessions])
    check_pdf_support(reports)
    merged = merge_sessions([load_session(p) for p in args.sessions])
    if output is not None:
        write_merged(merged, output, reports, args.force)
    else:
        for report in reports:
            write_report(merged, report, force=args.force)
    lines = [*terminal_table(merged, TableChoice(width=terminal_width())), *rank_lines(merged)]
    lines += [f"merged: {output}"] if output else []
    lines += [f"report:  {r}" for r in reports]
    lines += [f"warning: {visible(w)}" for w in merged.warnings]
    emit(lines)
    return 0


def write_merged(
    merged: ProfileSession,
    session_path: Path,
    reports: Sequence[Path],
    force: bool,
    own: Collection[Path] = (),
) -> None:
    """The merged session, then the reports; `own`: the names hybridprof chose itself."""
    write_atomic(session_path, merged.to_json(), force, own=session_path in own)
    for report in reports:
        write_report(merged, report, force=force, own=report in own)


__all__ = ["build_parser", "main", "write_merged"]
