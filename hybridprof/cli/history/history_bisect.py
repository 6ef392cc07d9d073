"""Find the first commit between GOOD and BAD that made a model, or a layer, slower.

The commits after GOOD up to BAD that changed MODEL.py (only the file is read at a revision, so
only those can differ) are searched by halving, as git bisect does. Each commit asked about is
measured against GOOD in a paired run, as `hybridprof diff --run MODEL.py --rev GOOD --rev
COMMIT` measures it (both in one process, iterations interleaved). BAD is measured first: it
names what to watch (with --layer, the matching layers; else the layers slower at BAD, or the
whole iteration when no layer is slower alone) and by how much they stepped. A commit between
is bad when a watched layer's paired ratio lies above the step's middle and its interval
excludes no change, good when each lies below the middle and its interval excludes BAD's
level; else inconclusive, and measured again with twice the pairs, up to --retries times,
before the search stops and says which commits are left. Options of diff --run (the model's
inputs, the selection, --iters, --threads, --threshold, --min-delta...) follow the three
arguments and are passed on to it.

exit codes: 0 the first bad commit named, with its evidence; 1 BAD is not slower than GOOD
(nothing to search); 5 inconclusive: the search stopped where it could not tell (run again on a
quieter machine or with more --iters); 2 bad input; 3 the model failed; 130 Ctrl-C, 143 SIGTERM.

examples:
  hybridprof history bisect v1.2 HEAD net.py
  hybridprof history bisect v1.2 HEAD net.py --layer 'features.*' --input-shape 1,3,32,32
"""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.cli.common import comma_values, command_parser, guarded, notice
from hybridprof.cli.terminal import emit
from hybridprof.errors import EXIT_INCONCLUSIVE, UsageError
from hybridprof.history.bisect_search import (
    DEFAULT_RETRIES,
    Bisection,
    Side,
    Verdict,
    Watched,
    bisect,
    sides,
    to_watch,
    verdict_of,
)
from hybridprof.reporting.text.diff_text import change_text

if TYPE_CHECKING:
    from hybridprof.diff import DiffResult
    from hybridprof.files.revisions import Checkout

__all__ = ["build_parser", "main"]
# diff's options that a bisection sets itself, or that make no sense in one
NOT_PASSED = ("--run", "--rev", "--report", "--fail-on-regression", "--all", "--force", "--history")


class Stopped(Exception):
    """A paired run was stopped (Ctrl-C, SIGTERM): the bisection ends with its exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("history bisect", __doc__)
    parser.add_argument("good", metavar="GOOD", help="a commit (or branch, tag) that was fast")
    parser.add_argument("bad", metavar="BAD", help="a later commit that is slower")
    parser.add_argument("model", metavar="MODEL.py", help="the model file, in a git checkout")
    parser.add_argument(
        "--layer",
        action="append",
        default=[],
        metavar="PATH",
        help="watch the layers matching this path or glob; repeat or separate with commas "
        "(default: the layers slower at BAD, or the whole iteration)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=DEFAULT_RETRIES,
        metavar="N",
        help="how many times an inconclusive commit is measured again, each time with twice "
        f"the pairs (default: {DEFAULT_RETRIES})",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return parser


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        parser = build_parser()
        try:
            args, rest = parser.parse_known_args(list(argv))
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        return run_bisect(args, rest)

    return guarded(body, "--debug" in argv)


class PairedJudge:
    """Judges a commit by a paired run against GOOD (`diff --run --rev GOOD --rev COMMIT`)."""

    def __init__(self, args: argparse.Namespace, rest: list[str]) -> None:
        self.model, self.good, self.rest = args.model, args.good, rest
        self.patterns = comma_values(args.layer)
        self.watched: tuple[Watched, ...] | None = None  # set by BAD's run
        self._check_options()

    def _argv(self, rev: str) -> list[str]:
        return ["--run", self.model, "--rev", self.good, "--rev", rev, *self.rest]

    def _check_options(self) -> None:
        """diff's parser judges the options passed on, before anything runs."""
        for word in self.rest:
            if word.split("=")[0] in NOT_PASSED:
                raise UsageError(f"{word.split('=')[0]} is set by history bisect itself; drop it")
        self._parsed(self.good)

    def _parsed(self, rev: str) -> argparse.Namespace:
        from hybridprof.cli.diff import build_parser as diff_parser

        return diff_parser().parse_args(self._argv(rev))

    def __call__(self, rev: str, attempt: int) -> tuple[Verdict, str]:
        result = self._measure(rev, attempt)
        if self.watched is None:  # BAD, first: what got slower, and by how much
            verdict, evidence = self._at_bad(result)
        else:
            found = sides(result, self.watched)
            verdict, evidence = verdict_of(found), _sides_text(found)
        again = f" (measured again, run {attempt + 1})" if attempt else ""
        notice(f"bisect: {rev[:10]} {verdict}{again}: {evidence}")  # it takes minutes: say each
        return verdict, evidence

    def _at_bad(self, result: DiffResult) -> tuple[Verdict, str]:
        if self.patterns and not any(
            fnmatch.fnmatchcase(x.path, p) for x in result.layers for p in self.patterns
        ):
            raise UsageError(
                f"--layer {', '.join(self.patterns)} matches no layer of {self.model}; its "
                f"layers include {', '.join(x.path or '(root)' for x in result.layers[:6])}"
            )
        watched = to_watch(result, self.patterns)
        if watched:
            self.watched = watched
            return "bad", _sides_text(sides(result, watched))
        if result.gate_answer() == "inconclusive":
            return "inconclusive", f"whole iteration: {change_text(result.total)}"
        return "good", f"nothing watched is slower; whole iteration: {change_text(result.total)}"

    def _measure(self, rev: str, attempt: int) -> DiffResult:
        from hybridprof.cli.diff import parse_min_delta, parse_threshold
        from hybridprof.cli.diff_run import paired_diff
        from hybridprof.cli.measure_options import DIFF_PAIRS
        from hybridprof.diff import given_floor
        from hybridprof.runtime.basics.stopping import DEFAULT_MAX_TIME_S

        args = self._parsed(rev)
        if attempt and args.iters == "auto":  # measure more: a longer time limit
            args.max_time = (args.max_time or DEFAULT_MAX_TIME_S) * 2**attempt
        elif attempt:  # measure more: twice the pairs, each time
            args.iters = (args.iters or DIFF_PAIRS) * 2**attempt
        floor = given_floor(parse_min_delta(args.min_delta)) if args.min_delta is not None else None
        outcome = paired_diff(args, self._argv(rev), parse_threshold(args.threshold), floor, [])
        if outcome.stopped is not None or outcome.result is None:
            raise Stopped(outcome.stopped or 130)
        return outcome.result


def _sides_text(found: list[Side]) -> str:
    """`blocks.3.fc2 x3.67 [3.38, 3.99], blocks.3.act x5.61 [5.04, 6.41] over 30 pairs`: each
    watched figure's paired ratio against GOOD and its interval."""
    parts, pairs = [], 0
    for side in found:
        name = side.watched.path or "(root)"
        change = side.change
        if change is None:
            parts.append(f"{name} not at this commit")
        elif change.paired is None:
            parts.append(f"{name} {change_text(change)}")
        else:
            paired = change.paired
            parts.append(f"{name} x{paired.ratio:.2f} [{paired.low:.2f}, {paired.high:.2f}]")
            pairs = max(pairs, paired.pairs)
    return ", ".join(parts) + (f" over {pairs} pairs" if pairs else "")


def _watch_text(watched: Watched) -> str:
    """`blocks.3.fc2 (x3.52 at BAD, at least x3.24: bad above x1.80)`."""
    name = watched.path or "(root)"
    return (
        f"{name} (x{watched.ratio:.2f} at BAD, at least x{watched.step:.2f}: bad above "
        f"x{watched.middle:.2f})"
    )


def run_bisect(args: argparse.Namespace, rest: list[str]) -> int:
    from hybridprof.files.revisions import Checkout

    model = Path(args.model)
    if model.suffix != ".py" or (rest[:1] and not rest[0].startswith("-")):
        raise UsageError(
            "give GOOD BAD MODEL.py first, then options: hybridprof history bisect v1.2 HEAD net.py"
        )
    if args.retries < 0:
        raise UsageError(f"--retries takes 0 or more, got {args.retries}")
    judge = PairedJudge(args, rest)
    checkout = Checkout.of(model)
    candidates = checkout.commits_between(args.good, args.bad)
    if not candidates:
        raise UsageError(
            f"no commit after {args.good} up to {args.bad} changed {checkout.path}; check the "
            f"order (git log --oneline {args.good}..{args.bad} -- {checkout.path})"
        )
    good = checkout.commit(args.good)
    notice(f"bisect: {len(candidates)} commits after {good[:10]} changed {checkout.path}")
    try:
        found = bisect(good, candidates, judge, args.retries)
    except Stopped as stop:
        notice("bisect stopped before it could name a commit")
        return stop.code
    emit(_report(found, judge, checkout, len(candidates)))
    if found.first_bad is not None:
        return 0
    nothing = bool(found.probes) and found.probes[0].verdict == "good"
    return 1 if nothing else EXIT_INCONCLUSIVE


def _report(found: Bisection, judge: PairedJudge, checkout: Checkout, count: int) -> list[str]:
    watched = [_watch_text(w) for w in judge.watched or ()]
    watching = ", ".join(watched) or "nothing (BAD is not slower)"
    lines = [
        f"bisect {checkout.path}: {count} commits after {found.good[:10]} changed it; "
        f"{found.runs} paired run{'s' if found.runs != 1 else ''}",
        f"watching the paired ratio against {found.good[:10]} of {watching}",
    ]
    for probe in found.probes:
        runs = f"{probe.runs} runs" if probe.runs > 1 else "1 run"
        lines.append(f"  {_named(checkout, probe.rev)}: {probe.verdict} ({runs}): {probe.evidence}")
    if found.first_bad is None:
        left = f"; still open: {', '.join(r[:10] for r in found.left)}" if found.left else ""
        lines.append(f"no first bad commit: {found.stopped}{left}")
        return lines
    lines.append(f"first bad commit: {_named(checkout, found.first_bad)}")
    bad = found.probe_of(found.first_bad)
    if bad is not None:
        lines.append(f"  against {found.good[:10]} (good): {bad.evidence}: bad")
    before = found.probe_of(found.last_good or "")
    last = (
        "the good commit itself"
        if found.last_good == found.good
        else _named(checkout, found.last_good or "")
    )
    lines.append(
        f"  the commit before it: {last}" + (f": {before.evidence}: good" if before else "")
    )
    return lines


def _named(checkout: Checkout, rev: str) -> str:
    _, _, subject = checkout.described(rev)
    return f'{rev[:10]} "{subject[:60]}"' if subject else rev[:10]
