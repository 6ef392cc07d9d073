"""A comparison of two runs as CSV: a row per layer."""

from __future__ import annotations

from hybridprof.diff import Change, DiffResult, LayerDiff
from hybridprof.reporting.csv_cells import csv_text

_QUANTITIES = (
    "self_cpu_us",
    "total_cpu_us",
    "backward_self_cpu_us",
    "backward_total_cpu_us",
    "self_device_us",
    "total_device_us",
    "self_cpu_mem",
    "cpu_mem",
    "self_device_mem",
    "device_mem",
)
# beyond_shift_pct: the change beyond the run-wide shift, which the verdict judged (ci_low and
# ci_high are then of new - shift * base).
_PARTS = ("base", "new", "delta", "delta_pct", "beyond_shift_pct", "ci_low", "ci_high", "verdict")


def render_diff_csv(diff: DiffResult) -> str:
    """One row per layer: identity, match rule, verdict, then base/new/delta/% /CI/verdict of each
    figure measured in either run (empty where not measured)."""
    present = [q for q in _QUANTITIES if any(layer.change(q) for layer in diff.layers)]
    header = ["base_path", "new_path", "class", "match", "verdict", "knock_on"]
    header += [f"{q}_{part}" for q in present for part in _PARTS]
    return csv_text(header, (_row(layer, present) for layer in diff.layers))


def _row(layer: LayerDiff, present: list[str]) -> list[object]:
    row: list[object] = [
        layer.base_path if layer.base_path is not None else "",
        layer.new_path if layer.new_path is not None else "",
        layer.class_name,
        layer.match,
        layer.verdict,
        "yes" if layer.knock_on else "",
    ]
    for quantity in present:
        row += _cells(layer.change(quantity))
    return row


def _cells(change: Change | None) -> list[object]:
    if change is None:
        return [""] * len(_PARTS)
    pct = change.delta_pct()
    beyond = change.beyond_shift_pct()
    memory = change.quantity.endswith("_mem")
    return [
        _blank(change.base),
        _blank(change.new),
        change.delta,
        "" if pct is None else round(pct, 2),
        "" if beyond is None else round(beyond, 2),
        _blank(change.low),
        _blank(change.high),
        "" if memory else change.verdict,
    ]


def _blank(value: float | None) -> object:
    return "" if value is None else value


class DiffCsvRenderer:
    extensions = (".csv",)
    binary = False

    def render(self, diff: DiffResult) -> str:
        return render_diff_csv(diff)


class DiffJsonRenderer:
    """A comparison of two runs as JSON: the `DiffResult` itself, which `hybridprof report`
    re-renders."""

    extensions = (".json",)
    binary = False

    def render(self, diff: DiffResult) -> str:
        return diff.to_json() + "\n"
