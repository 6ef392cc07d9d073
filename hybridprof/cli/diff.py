"""Compare two saved sessions: which layers got slower or faster, beyond noise.

Layers are matched by path, then (renamed or moved) by class, shape and position. Each time gets a
verdict from both runs' per-iteration values: slower / faster / within noise (a change under
--threshold never counts). Warnings about an unfair comparison (other torch, threads, CPU...) come
first.

exit codes: 0 no regression beyond the threshold (always 0 without --fail-on-regression),
1 a regression with --fail-on-regression, 2 bad input.

examples:
  hybridprof diff base.json new.json
  hybridprof diff base.json new.json --report review.html --report review.json
  hybridprof diff base.json new.json --threshold 5% --fail-on-regression
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
from hybridprof.cli.destinations import check_outputs
from hybridprof.cli.terminal import emit
from hybridprof.diff import DEFAULT_THRESHOLD_PCT, diff_sessions
from hybridprof.errors import UsageError
from hybridprof.reporting import diff_extensions, diff_renderer_for, write_diff_report


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("diff", __doc__)
    parser.add_argument("base", help="the session before the change (saved by hybridprof run)")
    parser.add_argument("new", help="the session after the change")
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write the comparison, repeatable; the format follows the extension: "
        + " ".join(diff_extensions())
        + " (default: none; the summary is printed)",
    )
    parser.add_argument(
        "--threshold",
        default=f"{DEFAULT_THRESHOLD_PCT:g}",
        metavar="PERCENT",
        help="smallest change that counts as slower or faster, e.g. 5 or 5%% "
        f"(default: {DEFAULT_THRESHOLD_PCT:g})",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a layer or the whole iteration is slower beyond the threshold",
    )
    parser.add_argument(
        "--all", action="store_true", help="print every layer, not only the changed ones"
    )
    parser.add_argument(
        "--match-across-models",
        action="store_true",
        help="pair the layers of runs of different models (other root classes) by path, class "
        "and position (default: runs of different models share no layer)",
    )
    add_common_options(parser)
    return parser


def parse_threshold(text: str) -> float:
    """'5%', '5' or '0.5%' -> percent; UsageError for anything else."""
    body = text.strip().removesuffix("%")
    try:
        value = float(body)
    except ValueError:
        raise UsageError(
            f"--threshold '{text}' is not a percentage; give e.g. --threshold 5%"
        ) from None
    if not 0 <= value < 1000:
        raise UsageError(f"--threshold {text} is out of range; give 0% to 999%")
    return value


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else run_diff(args)

    return guarded(body, "--debug" in argv)


def run_diff(args: argparse.Namespace) -> int:
    """Check the options and outputs first, read both sessions, compare, print, write reports."""
    threshold = parse_threshold(args.threshold)
    outputs = [Path(o) for o in args.report]
    for output in outputs:
        diff_renderer_for(output)
    check_outputs(outputs, (), args.force, [Path(args.base), Path(args.new)])
    check_pdf_support(outputs)
    from hybridprof.files.storage import load_session

    base = load_session(args.base)
    new = load_session(args.new)
    diff = diff_sessions(
        base,
        new,
        threshold,
        base_label=args.base,
        new_label=args.new,
        across_models=args.match_across_models,
    )
    from hybridprof.reporting.diff_text import render_diff_text

    emit([render_diff_text(diff, all_layers=args.all).rstrip("\n")])
    for output in outputs:
        written = write_diff_report(diff, output, force=args.force)
        emit([f"report: {written}"])
    return 1 if args.fail_on_regression and diff.has_regression() else 0
