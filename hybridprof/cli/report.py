"""Re-render a saved session (or a comparison saved by `diff --report x.json`) as HTML, PDF, text,
CSV or JSON (no torch, no profiling).

The format follows each output's extension; without -o (or with -o -) the tree table is printed.

examples:
  hybridprof report hybridprof-out/session.json -o report.pdf
  hybridprof report session.json -o layers.csv -o layers.html --force
  hybridprof report session.json --show-events --max-depth 2
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hybridprof.cli.common import (
    add_common_options,
    check_pdf_support,
    command_parser,
    guarded,
    parse_or_exit_code,
)
from hybridprof.cli.destinations import check_outputs, is_stdout
from hybridprof.cli.terminal import emit
from hybridprof.diff import DiffResult
from hybridprof.errors import UsageError
from hybridprof.reporting import known_extensions, renderer_for, write_diff_report, write_report


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
        "--max-depth",
        type=int,
        metavar="N",
        help="printed table: deepest tree level shown (default: all)",
    )
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
    files = [Path(o) for o in args.output if not is_stdout(o)]
    for output in files:
        renderer_for(output)  # a known format, and its renderer importable
    check_outputs(files, (), args.force, [Path(args.session)])
    check_pdf_support(files)
    from hybridprof.files.storage import load_session_or_diff

    printed = not files or len(files) < len(args.output)  # no -o, or -o - among them
    session = load_session_or_diff(args.session)
    if isinstance(session, DiffResult):
        return render_saved_diff(session, files, printed, args.force)
    if printed:
        from hybridprof.reporting.page.ranks import rank_lines
        from hybridprof.reporting.text_table import render_text

        table = render_text(session, show_events=args.show_events, max_depth=args.max_depth)
        emit([table, *rank_lines(session)])
    for output in files:
        written = write_report(session, output, force=args.force)
        emit([f"report: {written}"])
    return 0


def render_saved_diff(diff: DiffResult, outputs: list[Path], printed: bool, force: bool) -> int:
    """A comparison saved by `hybridprof diff --report x.json`, printed or written again."""
    if printed:
        from hybridprof.reporting.diff_text import render_diff_text

        emit([render_diff_text(diff).rstrip("\n")])
    for output in outputs:
        written = write_diff_report(diff, output, force=force)
        emit([f"report: {written}"])
    return 0
