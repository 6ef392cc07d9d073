"""The eager-vs-compiled comparison as JSON (compare.json, which `hybridprof report` reads back):
every figure of the report, from the same `SpeedupSummary` as the page and the printed table."""

from __future__ import annotations

from hybridprof.diff.speedup import SpeedupSummary


class SpeedupJsonRenderer:
    """Every figure of the comparison: the headline row, each layer's row, both lanes."""

    extensions = (".json",)
    binary = False

    def render(self, summary: SpeedupSummary) -> str:
        return summary.to_json()


__all__ = ["SpeedupJsonRenderer"]
