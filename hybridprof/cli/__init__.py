"""The `hybridprof` command: one module per sub-command, each with `main(argv) -> int`.

Only the CLI prints or exits; library code raises `HybridprofError`s, which `common.guarded` turns
into one line on stderr and an exit code.
"""

from __future__ import annotations

import difflib
import importlib
import sys

from hybridprof import __version__

# name -> module; each module's docstring first line is its one-line help.
COMMANDS = {
    "analyze": "hybridprof.cli.analyze",
    "run": "hybridprof.cli.run",
    "report": "hybridprof.cli.report",
    "merge": "hybridprof.cli.merge",
    "diff": "hybridprof.cli.diff",
    "history": "hybridprof.cli.history",
}
OPTIONS = ("-h", "--help", "-V", "--version")

HELP = """usage: hybridprof [-h] [-V] <command> [options]

A layer-by-layer profiler for PyTorch models.

commands:
  analyze        plan what to profile: read the model's source and module tree, print the plan
  run            profile a model file (no model file: the bundled AlexNet demo); save the session
                 and a report
  report         re-render a saved session (or a saved diff) as HTML, PDF, text, CSV or JSON
  merge          merge the session-rank*.json of a torchrun run into one session and report
  diff           which layers got slower or faster, beyond noise: two saved sessions, or with
                 --run two model files (or one at two git revisions) profiled now in one
                 process, iterations interleaved; --fail-on-regression gates CI
  history        per-layer history across commits: add sessions, show each layer's change
                 points, bisect the commit that made a layer slower

options:
  -h, --help     show this help and exit
  -V, --version  print hybridprof's version and exit

Run 'hybridprof <command> --help' for a command's options."""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # No arguments asks for help, as with pip: help on stdout, exit 0.
    if not args or args[0] in ("-h", "--help"):
        print(HELP)
        return 0
    if args[0] in ("-V", "--version"):
        print(f"hybridprof {__version__}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"hybridprof: error: {_unknown(args[0])}", file=sys.stderr)
        return 2
    module = importlib.import_module(command)
    code: int = module.main(args[1:])
    return code


def _unknown(word: str) -> str:
    """The error for a first argument that is neither a command nor an option, with a suggestion."""
    kind = "option" if word.startswith("-") else "command"
    close = difflib.get_close_matches(word, OPTIONS if kind == "option" else tuple(COMMANDS), n=1)
    if close:
        hint = f"did you mean '{close[0]}'?"
    elif word.endswith(".py"):
        hint = f"did you mean 'hybridprof run {word}'?"
    else:
        hint = f"commands: {', '.join(COMMANDS)}; options: -h/--help, -V/--version"
    return f"unknown {kind} '{word}'; {hint} (see 'hybridprof --help')"


def run_main() -> None:
    """Console-script entry point."""
    try:
        code = main()
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not at exit, where a closed pipe can only be reported
    except BrokenPipeError:
        from hybridprof.cli.common import stdout_gone

        code = stdout_gone()
    sys.exit(code)
