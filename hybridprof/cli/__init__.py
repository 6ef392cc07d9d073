"""The `hybridprof` command: one module per sub-command, each with `main(argv) -> int`.

Only the CLI prints or exits; library code raises `HybridprofError`s, which `common.guarded` turns
into one line on stderr and an exit code.
"""

from __future__ import annotations

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
}

USAGE = f"""usage: hybridprof [--version] <command> [options]

A layer-by-layer profiler for PyTorch models.

commands:
  analyze   plan what to profile: read the model's source and module tree, save the plan
  run       profile a model file (no arguments: the bundled AlexNet demo), save session and report
  report    re-render a saved session (or a saved diff) as HTML, PDF, text, CSV or JSON
  merge     merge the session-rank*.json of a torchrun run into one session and report
  diff      compare two saved sessions: which layers got slower or faster, beyond noise

Run 'hybridprof <command> --help' for a command's options. hybridprof {__version__}"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"hybridprof {__version__}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(
            f"hybridprof: error: unknown command '{args[0]}'; use one of: {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(command)
    code: int = module.main(args[1:])
    return code


def run_main() -> None:
    """Console-script entry point."""
    sys.exit(main())
