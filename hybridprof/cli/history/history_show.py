"""Show each layer's self time over the recent commits of one series, the layers with change
points first, each with a one-line sparkline.

A series is one machine fingerprint, model and branch (the one added to last, unless --machine,
--model or --branch picks another). A change point is a commit from which a layer's level moved
by at least --min-change, found per layer with ruptures' PELT and tested with a t-test on its two
sides, which gives its ratio and 95% interval; it shows once two commits after it are measured.
What moved every layer together at one commit is the environment's (the machine, torch, threads,
or a change to the whole model) and is said once, not blamed on a layer. --report writes the same
as a self-contained HTML page (a small time series per layer, its change points marked, the commit
range on hover, a differential icicle between any two commits) or a PDF.

exit codes: 0 shown; with --fail-on-change, 1 when a matching layer got slower at one of the last
--recent commits and is slower still; 2 bad input (no history, a damaged file, an unknown series
or revision); 4 PDF reports lack system libraries.

examples:
  hybridprof history show
  hybridprof history show --layer 'blocks.*.attn' --since 3f2a1b0 --report history.html
  hybridprof history show --db history.sqlite --fail-on-change 'blocks.*' --recent 3
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hybridprof.cli.common import (
    add_common_options,
    check_pdf_support,
    comma_values,
    command_parser,
    guarded,
    notice,
    parse_or_exit_code,
)
from hybridprof.cli.destinations import DEFAULT_OUT_DIR, check_outputs
from hybridprof.cli.diff import parse_threshold
from hybridprof.cli.terminal import emit
from hybridprof.errors import UsageError
from hybridprof.history.overview import (
    DEFAULT_MIN_CHANGE_PCT,
    Change,
    HistoryOverview,
    LayerHistory,
)
from hybridprof.history.series import DEFAULT_LAST
from hybridprof.history.store import DEFAULT_NAME, HistoryStore, Series

__all__ = ["build_parser", "default_db", "main"]
DEFAULT_RECENT = 5
EXTENSIONS = (".html", ".htm", ".pdf")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("history show", __doc__)
    parser.add_argument(
        "--db",
        metavar="FILE",
        help=f"the history file (default: ./{DEFAULT_NAME}, else "
        f"./{DEFAULT_OUT_DIR}/{DEFAULT_NAME})",
    )
    _add_window_options(parser)
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="also write the history as a report, repeatable: .html (interactive) or .pdf "
        "(default: none; the terminal view is printed)",
    )
    parser.add_argument(
        "--all", action="store_true", help="print every layer, not only the changed and largest"
    )
    parser.add_argument(
        "--fail-on-change",
        action="append",
        default=[],
        metavar="PATH",
        help="exit 1 when a layer matching this glob got slower at one of the last --recent "
        "commits and is slower still; repeat or separate with commas (default: exit 0)",
    )
    parser.add_argument(
        "--recent",
        type=int,
        default=DEFAULT_RECENT,
        metavar="N",
        help=f"with --fail-on-change: the commits counted as new (default: {DEFAULT_RECENT})",
    )
    add_common_options(parser)
    return parser


def _add_window_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--layer",
        action="append",
        default=[],
        metavar="PATH",
        help="only layers matching this path or glob, e.g. 'blocks.*.attn'; repeat or separate "
        "with commas (default: every layer)",
    )
    parser.add_argument(
        "--since",
        metavar="NAME",
        help="from this commit on (a recorded hash or its prefix, or a revision git knows here) "
        "(default: the last --last commits)",
    )
    parser.add_argument(
        "--last",
        type=int,
        default=DEFAULT_LAST,
        metavar="N",
        help=f"at most the N newest commits; 0 for no limit (default: {DEFAULT_LAST})",
    )
    parser.add_argument(
        "--machine",
        metavar="NAME",
        help="the series of this machine: its key (or a prefix of it) as listed, or its "
        "--machine name (default: the series added to last)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the series of this model, e.g. net.py:Net (default: as --machine)",
    )
    parser.add_argument(
        "--branch", metavar="NAME", help="the series of this branch (default: as --machine)"
    )
    parser.add_argument(
        "--min-change",
        default=f"{DEFAULT_MIN_CHANGE_PCT:g}",
        metavar="PERCENT",
        help="smallest change of a layer's level that is a change point, e.g. 5 or 5%% "
        f"(default: {DEFAULT_MIN_CHANGE_PCT:g})",
    )


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else show(args)

    return guarded(body, "--debug" in argv)


def show(args: argparse.Namespace) -> int:
    """Check the options and outputs, read the window, find its change points, print, report."""
    from hybridprof.history.overview import overview, recent_regressions
    from hybridprof.history.series import read_window
    from hybridprof.history.store import open_store
    from hybridprof.reporting.history.history_text import render_history_text

    min_change = _min_change(args.min_change)
    outputs = _outputs(args)
    db = Path(args.db) if args.db else default_db()
    check_outputs(outputs, (), args.force, [db])
    check_pdf_support(outputs)
    if args.last < 0 or args.recent < 1:
        raise UsageError("--last takes 0 (no limit) or more commits, --recent 1 or more")
    with open_store(db) as store:
        if store.migrated_from is not None:
            notice(f"migrated history {db} from schema {store.migrated_from}")
        chosen, others = choose_series(store, args.machine, args.model, args.branch)
        since = _since(args.since)
        window = read_window(store, chosen, args.last or None, since)
    view = overview(str(db), window, min_change, comma_values(args.layer), others)
    emit(render_history_text(view, all_layers=args.all))
    for output in outputs:
        from hybridprof.reporting.history.history_page import write_history_report

        emit([f"report: {write_history_report(view, output, args.force)}"])
    failing = comma_values(args.fail_on_change)
    if failing:
        return _gate(recent_regressions(view, failing, args.recent), view, args.recent)
    return 0


def _min_change(text: str) -> float:
    try:
        return parse_threshold(text)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--threshold", "--min-change")) from None


def _outputs(args: argparse.Namespace) -> list[Path]:
    outputs = [Path(name) for name in args.report]
    for output in outputs:
        if output.suffix.lower() not in EXTENSIONS:
            raise UsageError(
                f"--report {output}: unknown extension '{output.suffix}'; give "
                + ", ".join(EXTENSIONS)
            )
    return outputs


def default_db() -> Path:
    """./hybridprof-history.sqlite when there is one, else the one in run's default folder."""
    here = Path(DEFAULT_NAME)
    return here if here.exists() else Path(DEFAULT_OUT_DIR) / DEFAULT_NAME


def choose_series(
    store: HistoryStore, machine: str | None, model: str | None, branch: str | None
) -> tuple[Series, list[Series]]:
    """The series asked for (the newest of those matching), and the file's others."""
    every = store.all_series()
    if not every:
        raise UsageError(
            f"history {store.path} holds no session yet; add some: hybridprof "
            "history add SESSION.json"
        )
    matching = [
        s
        for s in every
        if (machine is None or s.machine.key().startswith(machine) or s.machine.label == machine)
        and (model is None or s.model == model)
        and (branch is None or s.branch == branch)
    ]
    if not matching:
        from hybridprof.reporting.history.history_text import series_text

        listed = "; ".join(series_text(s) for s in every[:5])
        raise UsageError(
            f"no series in {store.path} matches the --machine/--model/--branch "
            f"given; it holds: {listed}"
        )
    return matching[0], [s for s in every if s != matching[0]]


def _since(given: str | None) -> str | None:
    """A revision git knows here, as its full hash; else the text as given (a recorded hash's
    prefix, or a label)."""
    if given is None:
        return None
    from hybridprof.files.revisions import Checkout

    checkout = Checkout.around(Path.cwd())
    if checkout is None:
        return given
    try:
        return checkout.commit(given)
    except UsageError:
        return given


def _gate(found: list[tuple[LayerHistory, Change]], view: HistoryOverview, recent: int) -> int:
    """--fail-on-change's answer: a line per layer that got slower and still is."""
    from hybridprof.reporting.format import visible
    from hybridprof.reporting.history.history_text import change_text

    if not found:
        emit([f"gate: pass: no matching layer got slower in the last {recent} commits"])
        return 0
    lines = [f"gate: fail: {len(found)} layer(s) got slower in the last {recent} commits:"]
    lines += [f"  {layer.path or '(root)'}: {change_text(c, view.window)}" for layer, c in found]
    emit(visible(line) for line in lines)  # a line break in a name starts no line
    return 1
