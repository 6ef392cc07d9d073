"""Per-layer history across commits: which commit made which layer slower, and was it the code or
the machine.

commands:
  add      record sessions' per-layer figures under a commit (one SQLite file)
  show     each layer's time over the recent commits, the layers with change points first; in
           the terminal, or as an HTML or PDF report
  bisect   find the first commit between a good and a bad one that made the model (or a layer)
           slower, with paired runs (diff --run --rev) over the commits between

Run 'hybridprof history <command> --help' for a command's options.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence

COMMANDS = {
    "add": "hybridprof.cli.history.history_add",
    "show": "hybridprof.cli.history.history_show",
    "bisect": "hybridprof.cli.history.history_bisect",
}
USAGE = "usage: hybridprof history [-h] {add,show,bisect} ..."


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(f"{USAGE}\n\n{__doc__.strip() if __doc__ else ''}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        close = difflib.get_close_matches(args[0], tuple(COMMANDS), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"commands: {', '.join(COMMANDS)}"
        print(
            f"hybridprof history: error: unknown command '{args[0]}'; {hint} (see 'hybridprof "
            "history --help')",
            file=sys.stderr,
        )
        return 2
    code: int = importlib.import_module(command).main(args[1:])
    return code


__all__ = ["COMMANDS", "main"]
