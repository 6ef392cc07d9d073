"""A comparison of two runs as text: the summary `hybridprof diff` prints, with every layer."""

from __future__ import annotations

from hybridprof.diff import DiffResult
from hybridprof.reporting.diff_text import render_diff_text


class DiffTextRenderer:
    extensions = (".txt",)
    binary = False

    def render(self, diff: DiffResult) -> str:
        return render_diff_text(diff, all_layers=True)
