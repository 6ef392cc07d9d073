"""A comparison of two runs as JSON: the `DiffResult` itself, which `hybridprof report`
re-renders."""

from __future__ import annotations

from hybridprof.diff import DiffResult


class DiffJsonRenderer:
    extensions = (".json",)
    binary = False

    def render(self, diff: DiffResult) -> str:
        return diff.to_json() + "\n"
