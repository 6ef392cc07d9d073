"""The progress bar's lines for compiling: said without a terminal too (a CI log)."""

from __future__ import annotations

import io

from hybridprof.cli.progress import ProgressBar


def test_compiling_is_said_as_it_starts_and_when_it_is_over_without_a_terminal() -> None:
    stream = io.StringIO()
    with ProgressBar(False, stream=stream, compiling="blocks (inductor)") as bar:
        bar("compile", 0, 1)
        bar("warmup", 1, 3)  # the bar's own phases draw nothing without a terminal
        bar("compile", 1, 1)
    first, second = stream.getvalue().splitlines()
    assert first == "compiling blocks (inductor) in warm-up (the first calls compile) ..."
    assert second.startswith("compiled blocks (inductor): warm-up took ")
    assert second.endswith(" s")
