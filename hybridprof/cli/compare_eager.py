"""`hybridprof run --compare-eager`: the eager and compiled runs, the comparison printed and saved
(compare.html and compare.json beside the session); the compiled session is the run's session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hybridprof.datamodel import ProfilePlan, ProfileSession

COMPARE_FILES = ("compare.html", "compare.json")


def compared(
    setup: Any, inputs: Any, plan: ProfilePlan, options: Any, folder: Path
) -> ProfileSession:
    from hybridprof.reporting import write_diff_report
    from hybridprof.reporting.compare_text import render_comparison

    comparison = setup.measure_speedup(inputs, plan, options)
    print(render_comparison(comparison), file=sys.stderr, end="")
    folder.mkdir(parents=True, exist_ok=True)
    for name in COMPARE_FILES:
        written = write_diff_report(comparison.diff, folder / name, force=True)
        print(f"comparison: {written}", file=sys.stderr)
    return comparison.compiled  # type: ignore[no-any-return]


def compare_folder(session: Path | None, out_dir: Path) -> Path:
    """The comparison files go beside the session (into the out dir when it goes to stdout)."""
    return session.parent if session is not None else out_dir
