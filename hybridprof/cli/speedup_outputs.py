"""`hybridprof run --compare-eager`: the eager and compiled runs, their speed-up printed and saved
(the comparison's HTML and JSON, named by `destinations.plan_run_outputs`); the compiled session
is the run's session."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridprof.cli.destinations import make_folders
from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.runtime.runs.options import ProgressFn


def run_speedup(
    setup: Any,
    inputs: Any,
    plan: ProfilePlan,
    options: Any,
    files: Sequence[Path],
    progress: ProgressFn | None = None,
) -> ProfileSession:
    """Both lanes measured, the speed-up printed, and the comparison written to `files` (own
    names, checked before the run: replaced only over a comparison hybridprof wrote)."""
    from hybridprof.reporting import write_speedup_report
    from hybridprof.reporting.text.speedup_text import render_speedup

    result = setup.measure_speedup(inputs, plan, options, progress=progress)
    summary = result.summary()  # one set of figures for the terminal and both files
    print(render_speedup(summary), file=sys.stderr, end="")
    make_folders(files)
    for path in files:
        written = write_speedup_report(summary, path, own=True)
        print(f"comparison: {written}", file=sys.stderr)
    return result.compiled  # type: ignore[no-any-return]
