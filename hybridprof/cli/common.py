"""What every sub-command shares: error mapping and the common options."""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import NoReturn

from hybridprof.errors import HybridprofError, Terminated, UsageError


class CommandParser(argparse.ArgumentParser):
    """argparse, but a bad option is a UsageError (one line, exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; see '{self.prog} --help'")


def command_parser(command: str, doc: str | None) -> CommandParser:
    """The parser of `hybridprof <command>`: its module docstring is its help."""
    return CommandParser(
        prog=f"hybridprof {command}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")


def guarded(action: Callable[[], int], debug: bool) -> int:
    """Run a command body; map errors to one stderr line and an exit code (traceback with
    --debug)."""
    try:
        return action()
    except HybridprofError as exc:
        if debug:
            traceback.print_exc()
        print(f"hybridprof: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print("hybridprof: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hybridprof: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        print(
            f"hybridprof: internal error: {type(exc).__name__}: {one_line(str(exc))} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


@contextlib.contextmanager
def model_prints_to_stderr() -> Iterator[None]:
    """The model file's own print()s (at import, in its entry, in forward) go to stderr, so stdout
    holds only hybridprof's results: `analyze --format json | jq` and the run table stay clean."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def one_line(message: str) -> str:
    """The message on one line, with control characters (from module names) shown escaped."""
    from hybridprof.reporting.format import visible

    return " ".join(visible(message, newlines=True).split())
