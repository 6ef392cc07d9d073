"""Compare two runs: which layers got slower or faster, beyond noise.

With --run (the CI gate): load both model files in one process (two separate imports) and
alternate their measured iterations (ABBA), so whatever drifts on the machine hits both alike;
each layer is then judged on its per-pair ratios (at one torch thread unless --threads says
otherwise). --rev reads one model file at git revisions
instead (--rev main --rev HEAD; one --rev: that revision against the file as it is). Without
--run: two saved sessions (hybridprof run -o x.json), each judged on its own iterations.

Layers are matched by path, then (renamed or moved) by class, shape and position, and every
layer matched under another path is listed with its rule. A change under --threshold or under
--min-delta never counts. Warnings about an unfair comparison (other torch, threads, CPU...) come
first.

exit codes: 0 no regression (always 0 without --fail-on-regression); with --fail-on-regression,
1 a regression (a layer or the whole iteration slower beyond the threshold and the floor), 5
inconclusive: the comparison cannot tell (a noisy or interrupted run of two saved sessions, runs
that could not be paired, an interval wider than the threshold): run again on a quieter machine
or with more iterations; 2 bad input, 3 a model failed, 4 PDF reports lack system libraries,
130 Ctrl-C, 143 SIGTERM (an interrupted --run still prints the pairs done).

examples:
  hybridprof diff --run base.py new.py --fail-on-regression
  hybridprof diff --run net.py --rev main --rev HEAD --iters auto --fail-on-regression
  hybridprof diff base.json new.json --report review.html --report review.json
  hybridprof diff base.json new.json --threshold 5% --min-delta 10us --fail-on-regression
"""

from __future__ import annotations

import argparse
import re
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
from hybridprof.cli.history.history_record import add_history_option, recorder_for_diff
from hybridprof.cli.measure_options import add_run_options, check_no_run_options
from hybridprof.cli.terminal import emit
from hybridprof.diff import DEFAULT_THRESHOLD_PCT, DiffResult, Floor, diff_sessions, given_floor
from hybridprof.errors import EXIT_INCONCLUSIVE, UsageError
from hybridprof.reporting import diff_extensions, diff_renderer_for, write_diff_report

__all__ = ["build_parser", "main", "parse_threshold"]


_TIME = re.compile(r"(?P<value>[0-9]*\.?[0-9]+)\s*(?P<unit>us|µs|ms|s)?")
_UNIT_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("diff", __doc__)
    _add_what_to_compare(parser)
    _add_judging_options(parser)
    add_run_options(parser)
    add_history_option(parser)
    add_common_options(parser)
    return parser


def _add_what_to_compare(parser: argparse.ArgumentParser) -> None:
    """The two runs (saved sessions, or model files with --run) and where the comparison goes."""
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="two saved sessions (base, then new); with --run two model files, or one with --rev",
    )
    parser.add_argument(
        "--run",
        action="store_true",
        help="profile both model files now, in one process, iterations interleaved (default: "
        "compare saved sessions)",
    )
    parser.add_argument(
        "--rev",
        action="append",
        default=[],
        metavar="NAME",
        help="with --run and one model file: read it at this git revision (a branch, tag or "
        "commit); repeat for base and new, or give once to compare against the file as it is "
        "(default: none)",
    )
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write the comparison, repeatable; the format follows the extension: "
        + " ".join(diff_extensions())
        + " (default: none; the summary is printed)",
    )


def _add_judging_options(parser: argparse.ArgumentParser) -> None:
    """What counts as a change, what the exit code says, what is printed."""
    parser.add_argument(
        "--threshold",
        default=f"{DEFAULT_THRESHOLD_PCT:g}",
        metavar="PERCENT",
        help="smallest change that counts as slower or faster, e.g. 5 or 5%% "
        f"(default: {DEFAULT_THRESHOLD_PCT:g})",
    )
    parser.add_argument(
        "--min-delta",
        metavar="TIME",
        help="smallest change in time that counts, e.g. 5us or 0.1ms (default: 20 x the "
        "profiler's cost per recorded op, measured with --run; 5us for saved sessions)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help=f"exit 1 on a regression, {EXIT_INCONCLUSIVE} when the comparison is inconclusive "
        "(default: exit 0 either way)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print how each layer was judged and every changed layer with its ops (default: "
        "one screen: the answer, the layers slower or faster, a count of the rest)",
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


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else run_diff(args, list(argv))

    return guarded(body, "--debug" in argv)


def run_diff(args: argparse.Namespace, argv: list[str]) -> int:
    """Check the options and outputs first, then compare (saved sessions, or a paired run),
    print, write the reports, and answer with the exit code."""
    threshold = parse_threshold(args.threshold)
    floor = given_floor(parse_min_delta(args.min_delta)) if args.min_delta is not None else None
    outputs = [Path(o) for o in args.report]
    for output in outputs:
        diff_renderer_for(output)
    stopped = None
    history = recorder_for_diff(args)  # checked before anything runs
    if args.run:
        from hybridprof.cli.diff_run import paired_diff

        outcome = paired_diff(args, argv, threshold, floor, outputs)
        if outcome.result is None:
            return outcome.stopped or 130
        result, stopped = outcome.result, outcome.stopped
        if history is not None and stopped is None:
            emit(history.add(outcome.sessions))
    else:
        result = _saved_diff(args, threshold, floor, outputs)
    from hybridprof.reporting.text.diff_text import render_diff_text

    emit([render_diff_text(result, all_layers=args.all, verbose=args.verbose).rstrip("\n")])
    for output in outputs:
        written = write_diff_report(result, output, force=args.force)
        emit([f"report: {written}"])
    if stopped is not None:  # the pairs done so far are compared, but the run did not finish
        return stopped
    return exit_code(result) if args.fail_on_regression else 0


def exit_code(result: DiffResult) -> int:
    """The gate's exit code: 1 regression, 5 inconclusive, 0 pass."""
    answer = result.gate_answer()
    return {"regression": 1, "inconclusive": EXIT_INCONCLUSIVE}.get(answer, 0)


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


def parse_min_delta(text: str) -> float:
    """'5us', '5', '0.1ms' -> microseconds; UsageError for anything else."""
    found = _TIME.fullmatch(text.strip().lower())
    if found is None:
        raise UsageError(f"--min-delta '{text}' is not a time; give e.g. --min-delta 5us or 0.1ms")
    value = float(found["value"]) * _UNIT_US[found["unit"]]
    if not value < 1e9:
        raise UsageError(f"--min-delta {text} is out of range; give less than 1000 s")
    return value


def _saved_diff(
    args: argparse.Namespace, threshold: float, floor: Floor | None, outputs: list[Path]
) -> DiffResult:
    check_no_run_options(args, build_parser())
    if len(args.files) != 2:
        raise UsageError(
            f"diff compares two saved sessions, got {len(args.files)} file(s): give base.json "
            "new.json, or --run base.py new.py to profile two model files"
        )
    base_file, new_file = args.files
    for name in args.files:
        if name.endswith(".py"):
            raise UsageError(
                f"'{name}' is a model file; add --run to profile both: hybridprof diff --run "
                f"{base_file} {new_file}"
            )
    check_outputs(outputs, (), args.force, [Path(base_file), Path(new_file)])
    check_pdf_support(outputs)
    from hybridprof.files.storage import load_session

    base = load_session(base_file)
    new = load_session(new_file)
    return diff_sessions(
        base,
        new,
        threshold,
        base_label=base_file,
        new_label=new_file,
        floor=floor,
        across_models=args.match_across_models,
    )
