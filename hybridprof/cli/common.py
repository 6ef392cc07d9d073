"""What every sub-command shares: error mapping, help layout, and the options they have in common.

Help conventions (one place, so every command reads alike): every option has help text that states
its default; metavars are FILE, DIR, NAME, PATH, SHAPE, N, SECONDS, PERCENT, TIME (a duration with
its unit, 5us); description and options wrap at one width.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import shutil
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from hybridprof.errors import HybridprofError, Terminated, UsageError
from hybridprof.files.loader import DEFAULT_ENTRY

if TYPE_CHECKING:
    from hybridprof.reporting.text.fitted_table import TableChoice

STDOUT = "-"  # as an output name: write to standard output (the usual Unix convention)
MAX_HELP_WIDTH = 100


def help_width() -> int:
    """The one width help text wraps at: the terminal's (argparse's rule), at most 100 columns."""
    return min(shutil.get_terminal_size().columns, MAX_HELP_WIDTH) - 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Options and description wrap at the same width; indented lines (examples) are kept as is."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=help_width(), max_help_position=30)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(refill(text, width, indent))


def refill(text: str, width: int, indent: str = "") -> list[str]:
    """Prose paragraphs re-wrapped at `width`; indented lines and `header:` lines kept as is."""
    lines: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            text = " ".join(paragraph)
            wrapped = textwrap.wrap(text, width, break_on_hyphens=False)  # keep "re-render" whole
            lines.extend(indent + line for line in wrapped)
            paragraph.clear()

    for line in text.strip("\n").splitlines():
        if line.strip() and not line[0].isspace() and not line.rstrip().endswith(":"):
            paragraph.append(line.strip())
            continue
        flush()
        lines.append(indent + line if line.strip() else "")
    flush()
    return lines


class CommandParser(argparse.ArgumentParser):
    """argparse, but a bad option is a UsageError (one line, exit 2) like every other error, and a
    misspelt option gets a suggestion."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}{self._suggestion(message)}; see '{self.prog} --help'")

    def _suggestion(self, message: str) -> str:
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        known = [s for action in self._actions for s in action.option_strings]
        for word in message[len(prefix) :].split():
            close = difflib.get_close_matches(word.split("=")[0], known, n=1)
            if word.startswith("-") and close:
                return f" (did you mean {close[0]}?)"
        return ""


def command_parser(command: str, doc: str | None) -> CommandParser:
    """The parser of `hybridprof <command>`: its module docstring is its help."""
    # No abbreviations: `--iter 10` must not quietly mean `--iters` (nor `--flop` `--flops`); an
    # option that is not spelt out is refused with the full name suggested.
    return CommandParser(
        prog=f"hybridprof {command}",
        description=doc,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )


def add_model_options(parser: argparse.ArgumentParser, entry_default: str = DEFAULT_ENTRY) -> None:
    """How the model and its inputs are found in the model file (analyze and run)."""
    parser.add_argument(
        "--entry",
        metavar="NAME",
        help=f"function returning the nn.Module (default: {entry_default})",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--inputs",
        metavar="NAME",
        help="function in the file returning the inputs (default: the entry's (model, inputs) "
        "tuple, else example_inputs())",
    )
    given.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="SHAPE",
        help="random input of this shape, e.g. 1,3,224,224 or 4x128:long; repeat per argument "
        "(default: none, see --inputs)",
    )


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """Which modules to profile (analyze and run)."""
    parser.add_argument(
        "--paths",
        action="append",
        default=[],
        metavar="PATH",
        help="module paths or globs to select, e.g. features.0 or 'blocks.*.attn'; repeat the "
        "option or separate with commas (default: every module that runs a forward, so the rows "
        "add up to the whole step)",
    )
    parser.add_argument(
        "--depth", type=int, metavar="N", help="select every module at this depth (default: off)"
    )
    parser.add_argument(
        "--leaves-only",
        action="store_true",
        help="select only the leaves, as torchprof did (default: every module)",
    )
    parser.add_argument(
        "--with-parents",
        action="store_true",
        help="with --paths/--depth/--leaves-only: also select parents whose forward runs ops "
        "directly (attention that uses its out_proj's weights, fused fast paths)",
    )


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """How the printed tree table looks (run and report)."""
    from hybridprof.reporting.text.fitted_table import COLUMN_KEYS, SORT_KEYS

    parser.add_argument(
        "--columns",
        metavar="NAME",
        help="printed table: these columns, comma-separated, from "
        + ", ".join(COLUMN_KEYS)
        + "; or all (default: as many as fit the terminal's width, the least telling left out "
        "first, and a line says which)",
    )
    parser.add_argument(
        "--sort",
        default="module",
        metavar="NAME",
        help="printed table: order each level by this column, largest first: "
        + ", ".join(k for k in SORT_KEYS if k != "module")
        + ", or module, the order the model defines (default: module)",
    )


def table_choice(args: argparse.Namespace, stream: TextIO | None = None) -> TableChoice:
    """The printed table's columns, width and order, checked (UsageError before any work)."""
    from hybridprof.reporting.text.fitted_table import TableChoice, check_choice

    columns = tuple(comma_values([args.columns])) if args.columns else None
    check_choice(columns, args.sort)
    return TableChoice(columns=columns, width=terminal_width(stream), sort=args.sort)


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width to fit: $COLUMNS when set, else the terminal's; None when the table goes to a
    file or a pipe (nothing to fit, and a script reading it gets every column)."""
    import os

    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    out = stream or sys.stdout
    try:
        return shutil.get_terminal_size().columns if out is not None and out.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite output files you named that exist (hybridprof's own default files are "
        "replaced without it)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")


def comma_values(values: Iterable[str]) -> list[str]:
    """`--columns a,b` -> [a, b] (edge spaces and empty parts dropped)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def typed_selectors(values: Sequence[str]) -> list[Any]:
    """`--paths` values as typed (`--paths a,b --paths 'blocks.*'`): the planner resolves each
    against the model's paths (`module_tree.typed_parts`: an exact name first, then the comma
    parts, as paths or globs). Imports torch: only where a plan is made."""
    from hybridprof.planner.module_tree import Typed

    return [Typed(value) for value in values]


def guarded(action: Callable[[], int], debug: bool) -> int:
    """Run a command body; map errors to one stderr line and an exit code (traceback with
    --debug)."""
    try:
        return action()
    except HybridprofError as exc:
        if debug:
            traceback.print_exc()
        if not exc.reported:
            print(f"hybridprof: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print("hybridprof: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hybridprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout's reader went away (`| head`): the output ends there
        return stdout_gone()
    except Exception as exc:
        if debug:
            raise
        print(
            f"hybridprof: internal error: {type(exc).__name__}: "
            f"{one_line(str(exc), MAX_INTERNAL_CHARS)} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


def stdout_gone() -> int:
    """A reader that went away (`hybridprof -h | head`) ends the printing quietly: stdout points at
    /dev/null so the interpreter's last flush has nowhere to fail. Exit 0: nothing went wrong."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def parse_or_exit_code(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> argparse.Namespace | int:
    """Parsed options, or the exit code of `--help` (0), which argparse ends with SystemExit."""
    try:
        return parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def check_pdf_support(outputs: Iterable[Path]) -> None:
    """Before any work: PDF outputs need weasyprint's system libraries (an error if missing) and
    render slowly without an optional one (a note naming the package to install)."""
    if not any(p.suffix.lower() == ".pdf" for p in outputs):
        return
    from hybridprof.reporting.page.pdf import missing_optional_libraries

    missing = " ".join(missing_optional_libraries())
    if missing:
        notice(
            f"note: {missing} is not installed, so PDF reports render 3-5x slower; "
            f"install it with: sudo apt-get install -y {missing}"
        )


def notice(message: str, stream: TextIO | None = None) -> None:
    """A one-line note for people, on stderr unless told otherwise."""
    print(f"hybridprof: {message}", file=sys.stderr if stream is None else stream, flush=True)


@contextlib.contextmanager
def model_prints_to_stderr() -> Iterator[None]:
    """The model file's own print()s (at import, in its entry, in forward) go to stderr, so stdout
    holds only hybridprof's results: `analyze --format json | jq` and the run table stay clean."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


# An error line longer than this is no longer a line a person reads (torch's messages can carry
# kilobytes of C++ stack frames): the middle gives way, the start (what) and end (the fix) stay.
MAX_ERROR_CHARS = 600
MAX_INTERNAL_CHARS = 200  # an internal error's own text: the --debug traceback has it all


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """The message on one line, with control characters (from module names) shown escaped, at
    most `limit` characters."""
    from hybridprof.reporting.format import visible

    text = " ".join(visible(message, newlines=True).split())
    if len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail - 5]} ... {text[-tail:]}"
