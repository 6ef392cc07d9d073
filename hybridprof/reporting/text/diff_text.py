"""A comparison of two runs as text: warnings first, then the summary, then the changed layers.

What `hybridprof diff` prints by default fits one screen whatever the model's size (`brief_lines`):
the warnings, both runs, the whole iteration, the count of layers by verdict, the layers matched
under another path, the layers slower or faster (at most `BRIEF_LAYERS` of each), a count of the
rest, and the gate's answer. `-v` adds how
the layers were judged and every changed layer with its ops; `--all` lists every layer.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.diff import Change, DiffResult, LayerDiff, OpChange
from hybridprof.diff.basis import basis_note
from hybridprof.errors import EXIT_INCONCLUSIVE
from hybridprof.reporting.format import format_bytes, format_time_us, visible_lines

TOP = 5  # regressions and improvements named in the summary
BRIEF_LAYERS = 10  # the layers slower (and faster) the default output names; -v names them all
BRIEF_REASONS = 5  # the gate's reasons the default output gives
QUANTITY_TITLES = {
    "self_cpu_us": "self CPU",
    "total_cpu_us": "total CPU",
    "backward_self_cpu_us": "backward self CPU",
    "backward_total_cpu_us": "backward total CPU",
    "self_device_us": "self device",
    "total_device_us": "total device",
    "iteration_cpu_us": "iteration",
    "self_cpu_mem": "self CPU memory",
    "cpu_mem": "CPU memory",
    "self_device_mem": "self device memory",
    "device_mem": "device memory",
}


def signed_time(us: float) -> str:
    return ("+" if us >= 0 else "-") + format_time_us(abs(us))


def signed_pct(change: Change) -> str:
    pct = change.delta_pct()
    return "-" if pct is None else f"{pct:+.1f}%"


def interval_text(change: Change) -> str:
    """`[+1.2us, +3.4us]`, or "no interval" when a run had too few per-iteration values."""
    if change.low is None or change.high is None:
        return "no interval"
    return f"[{signed_time(change.low)}, {signed_time(change.high)}]"


def change_text(change: Change) -> str:
    """`84.000us -> 95.000us (+11.000us, +13.1%, 95% CI [...]): slower`."""
    memory = change.quantity.endswith("_mem")
    shown = format_bytes if memory else format_time_us

    def value(v: float | None) -> str:
        return "-" if v is None else shown(v)

    delta = format_bytes(change.delta) if memory else signed_time(change.delta)
    text = f"{value(change.base)} -> {value(change.new)} ({delta}, {signed_pct(change)}"
    if memory:
        return text + ")"
    beyond = change.beyond_shift_pct()
    if beyond is not None and change.shift is not None and abs(change.shift - 1.0) >= 0.005:
        shift = f"{100.0 * (change.shift - 1.0):+.1f}%"
        text += f"; beyond the run-wide {shift} shift: {beyond:+.1f}%"
    paired = change.paired
    if paired is not None:
        return text + (
            f"; paired: {paired.pct():+.1f}% over {paired.pairs} pairs, "
            f"{100 * paired.confidence:.3g}% CI [{100 * (paired.low - 1):+.1f}%, "
            f"{100 * (paired.high - 1):+.1f}%]): {change.verdict}"
        )
    return text + f", 95% CI {interval_text(change)}): {change.verdict}"


def own_work_text(layer: LayerDiff) -> str:
    """Why a layer's time moved, as far as its own work tells: what of it changed (its input
    grew, say: the same code doing more work), or that it is the same; "" when not compared."""
    if layer.own_work is None:
        return ""
    if not layer.own_work:
        return "own work unchanged (same ops, calls and shapes)"
    return "own work changed: " + "; ".join(layer.own_work)


def with_own_work(text: str, layer: LayerDiff) -> str:
    """A slower or faster layer's line, with what of its own work changed after it."""
    if layer.verdict not in ("slower", "faster") or layer.knock_on:
        return text
    said = own_work_text(layer)
    return f"{text}; {said}" if said else text


def verdict_label(layer: LayerDiff) -> str:
    """`slower`, or `slower (knock-on)` when its own work did not change."""
    return f"{layer.verdict} (knock-on)" if layer.knock_on else layer.verdict


def shift_lines(diff: DiffResult) -> list[str]:
    """How every layer moved together, per time figure, and what that means for the verdicts."""
    lines = []
    for shift in diff.shifts:
        title = QUANTITY_TITLES.get(shift.quantity, shift.quantity)
        lines.append(
            f"run-wide shift of {title}: {shift.pct():+.1f}% (95% CI "
            f"[{100 * (shift.low - 1):+.1f}%, {100 * (shift.high - 1):+.1f}%], median over "
            f"{shift.layers} layers; the layers scatter around it by ±{shift.band_pct():.1f}%); "
            f"a layer is slower or faster only beyond both the shift and "
            f"±{max(diff.threshold_pct, shift.band_pct()):.1f}%"
        )
    return lines


KNOCK_ON_NOTE = (
    "knock-on: slower or faster with its own work unchanged (same ops, calls and shapes) while "
    "another layer's changed, e.g. running in caches the changed layer filled; not a regression "
    "of its own"
)


def floor_line(diff: DiffResult) -> str:
    """What the min-delta floor is and where it comes from ("" in files that predate it)."""
    if not diff.min_delta_basis:
        return ""
    return (
        f"min delta: a change under {format_time_us(diff.min_delta_us)} is never slower or "
        f"faster by itself ({diff.min_delta_basis})"
    )


def pairing_line(diff: DiffResult) -> str:
    pairing = diff.pairing
    if pairing is None:
        return ""
    return (
        f"paired run: both models in one process, {pairing.pairs} pairs of iterations in "
        f"{pairing.order} order (stopped: {pairing.stop_reason})"
    )


def gate_lines(diff: DiffResult) -> list[str]:
    """The gate's answer, the exit code --fail-on-regression gives it, and why."""
    if diff.gate is None:
        return []
    answer = diff.gate.answer
    code = {"regression": 1, "inconclusive": EXIT_INCONCLUSIVE, "pass": 0}[answer]
    lines = [f"answer: {answer} (exit {code} with --fail-on-regression)"]
    lines.extend(f"  - {reason}" for reason in diff.gate.reasons)
    return lines


def matched_lines(diff: DiffResult) -> list[str]:
    """Every layer matched under another path, with its rule, whatever its verdict."""
    return [
        f"  matched: {layer_title(layer)}: {verdict_label(layer)}"
        for layer in diff.layers
        if layer.match not in ("path", "added", "removed")
    ]


def layer_title(layer: LayerDiff) -> str:
    if layer.match == "path" or layer.base_path is None or layer.new_path is None:
        return f"{layer.path or '(root)'} [{layer.class_name}]"
    return f"{layer.base_path} -> {layer.new_path} [{layer.class_name}, matched by {layer.match}]"


def summary_lines(diff: DiffResult) -> list[str]:
    """Warnings (loudly, first), identities, the total change, top regressions and improvements."""
    lines = []
    if diff.warnings:
        lines.append("WARNING: this comparison may be unfair:")
        lines.extend(f"  ! {w}" for w in diff.warnings)
        lines.append("")
    lines.append(f"base: {diff.base.short()}")
    lines.append(f"new:  {diff.new.short()}")
    lines.extend(f"note: {n}" for n in diff.notes)
    lines.append(f"threshold: {diff.threshold_pct:g}%; method: {diff.method}")
    lines.extend(line for line in (floor_line(diff), pairing_line(diff)) if line)
    lines.extend(shift_lines(diff))
    lines.append("")
    lines.append(f"whole iteration: {change_text(diff.total)}")
    lines.append(count_line(diff))
    lines.extend(matched_lines(diff))
    if diff.knock_ons():
        lines.append(KNOCK_ON_NOTE)
    for title, layers in (
        ("slower", diff.regressions()),
        ("inconclusive", diff.undecided()),
        ("faster", diff.improvements()),
        ("knock-on", diff.knock_ons()),
    ):
        for layer in layers[:TOP]:
            found = layer.change("self_cpu_us")
            shown = change_text(found) if found else layer.verdict
            lines.append(with_own_work(f"  {title}: {layer_title(layer)}: self {shown}", layer))
    return lines


def op_lines(ops: Sequence[OpChange]) -> list[str]:
    lines = []
    for op in ops:
        if op.status == "same":
            continue
        side = " (backward)" if op.backward else ""
        lines.append(
            f"      {op.name}{side}: {format_time_us(op.base_us)} x{op.base_calls} -> "
            f"{format_time_us(op.new_us)} x{op.new_calls} ({op.status})"
        )
    return lines


def layer_lines(layer: LayerDiff) -> list[str]:
    knock_on = " (knock-on)" if layer.knock_on else ""
    lines = [f"{layer.verdict.upper()}{knock_on}: {layer_title(layer)}"]
    for change in layer.times + layer.memory:
        lines.append(
            f"    {QUANTITY_TITLES.get(change.quantity, change.quantity)}: " + change_text(change)
        )
    if own_work_text(layer):
        lines.append(f"    {own_work_text(layer)}")
    if layer.ops:
        lines.append("    ops (self CPU per iteration):")
        lines.extend(op_lines(layer.ops))
    return lines


def brief_change(change: Change | None) -> str:
    """`48.950us -> 66.500us (+35.9%)`: a layer's self time in the one-screen answer."""
    if change is None:
        return "-"
    pct = change.delta_pct() if change.paired is None else change.paired.pct()
    shown = "" if pct is None else f" ({pct:+.1f}%)"
    return f"{format_time_us(change.base or 0.0)} -> {format_time_us(change.new or 0.0)}{shown}"


def brief_lines(diff: DiffResult) -> list[str]:
    """The one-screen answer (see the module docstring)."""
    lines = []
    if diff.warnings:
        lines += ["WARNING: this comparison may be unfair:", *(f"  ! {w}" for w in diff.warnings)]
        lines.append("")
    lines += [f"base: {diff.base.short()}", f"new:  {diff.new.short()}"]
    figures = basis_note(diff.notes)  # compensated or raw, both alike
    lines += [figures] if figures is not None else []
    lines += [line for line in (floor_line(diff), pairing_line(diff)) if line]
    lines += ["", f"whole iteration: {change_text(diff.total)}", count_line(diff)]
    matched = matched_lines(diff)  # every rename is said, as the help promises (a few here)
    lines += matched[:BRIEF_LAYERS]
    if len(matched) > BRIEF_LAYERS:
        lines.append(f"  ... and {len(matched) - BRIEF_LAYERS} more matched (-v lists them)")
    named = 0
    for title, layers in (("slower", diff.regressions()), ("faster", diff.improvements())):
        for layer in layers[:BRIEF_LAYERS]:
            found = layer.change("self_cpu_us")
            line = f"  {title}: {layer_title(layer)}: self {brief_change(found)}"
            lines.append(with_own_work(line, layer))
        if len(layers) > BRIEF_LAYERS:
            lines.append(f"  ... and {len(layers) - BRIEF_LAYERS} more {title} (-v lists them)")
        named += len(layers)
    lines.append(rest_line(diff, named))
    if diff.gate is not None:
        gate = gate_lines(diff)
        cut = len(gate) - 1 - BRIEF_REASONS
        lines += ["", *gate[: 1 + BRIEF_REASONS]]
        lines += [f"  ... and {cut} more reasons (-v)"] if cut > 0 else []
    return lines


def count_line(diff: DiffResult) -> str:
    added = sum(1 for layer in diff.layers if layer.verdict == "added")
    removed = sum(1 for layer in diff.layers if layer.verdict == "removed")
    renamed = sum(1 for layer in diff.layers if layer.match not in ("path", "added", "removed"))
    return (
        f"layers: {len(diff.regressions())} slower, {len(diff.undecided())} inconclusive, "
        f"{len(diff.improvements())} faster, {len(diff.knock_ons())} knock-on, {added} added, "
        f"{removed} removed, {renamed} matched under another path, {len(diff.layers)} in all"
    )


def rest_line(diff: DiffResult, named: int) -> str:
    """What the one-screen answer did not list, and how to see it."""
    rest = len(diff.layers) - named
    if not rest:
        return "(-v: how each layer was judged, with its ops)"
    if not named and all(layer.verdict == "within noise" for layer in diff.layers):
        return (
            f"no layer changed beyond noise and the threshold ({rest} within noise): -v says "
            "how each was judged, --all lists every layer"
        )
    verdicts: dict[str, int] = {}
    for layer in diff.layers:
        if layer.verdict not in ("slower", "faster") or layer.knock_on:
            label = verdict_label(layer)
            verdicts[label] = verdicts.get(label, 0) + 1
    counts = ", ".join(f"{n} {label}" for label, n in sorted(verdicts.items(), key=lambda x: -x[1]))
    return (
        f"the other {rest} layers are not listed ({counts}): -v lists every changed layer with "
        "its ops, --all every layer"
    )


def render_diff_text(diff: DiffResult, all_layers: bool = False, verbose: bool = False) -> str:
    """The one-screen answer; with `verbose`, the summary and how it was judged, then every
    changed, added or removed layer with its ops (every layer with `all_layers`)."""
    if not (verbose or all_layers):
        return visible_lines(brief_lines(diff)) + "\n"
    lines = summary_lines(diff)
    shown = [layer for layer in diff.layers if all_layers or layer.verdict not in ("within noise",)]
    lines.append("")
    if not shown:
        lines.append("no layer changed beyond noise and the threshold")
    for layer in shown:
        lines.extend(layer_lines(layer))
    hidden = len(diff.layers) - len(shown)
    if hidden:
        lines.append(f"({hidden} layer(s) within noise not listed)")
    gate = gate_lines(diff)
    if gate:
        lines += ["", *gate]
    return visible_lines(lines) + "\n"


class DiffTextRenderer:
    """A comparison of two runs as text: the summary `hybridprof diff` prints, with every layer."""

    extensions = (".txt",)
    binary = False

    def render(self, diff: DiffResult) -> str:
        return render_diff_text(diff, all_layers=True)
