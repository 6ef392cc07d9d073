"""`hybridprof run --compare-eager`: the eager and compiled runs, their speed-up printed and saved
(compare.html and compare.json beside the session); the compiled session is the run's session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hybridprof.datamodel import ProfilePlan, ProfileSession

SPEEDUP_FILES = ("compare.html", "compare.json")  # the names the option has always written


def run_speedup(
    setup: Any, inputs: Any, plan: ProfilePlan, options: Any, folder: Path
) -> ProfileSession:
    from hybridprof.reporting import write_diff_report
    from hybridprof.reporting.text.speedup_text import render_speedup

    result = setup.measure_speedup(inputs, plan, options)
    print(render_speedup(result), file=sys.stderr, end="")
    folder.mkdir(parents=True, exist_ok=True)
    for name in SPEEDUP_FILES:
        written = write_diff_report(result.diff, folder / name, force=True)
        print(f"comparison: {written}", file=sys.stderr)
    return result.compiled  # type: ignore[no-any-return]


def speedup_folder(session: Path | None, out_dir: Path) -> Path:
    """The speed-up's files go beside the session (into the out dir when it goes to stdout)."""
    return session.parent if session is not None else out_dir
