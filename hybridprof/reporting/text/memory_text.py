"""The memory section in words: the terminal's block under the table, the .txt report's section,
and the sentences the HTML and PDF reports share (where the peak was, what the start means).

Every figure comes from the session's memory section through the layer table's rows; only the
words are made here.
"""

from __future__ import annotations

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table
from hybridprof.analysis.tree import outside_label
from hybridprof.datamodel import DeviceMemory, MemoryBytes, ProfileSession, StepPeak
from hybridprof.reporting.format import format_bytes, format_time_us
from hybridprof.reporting.text.text_table import format_table

KEEPERS = 5  # layers named as keeping most for backward
LABELS = {
    "parameters": "parameters",
    "buffers": "buffers",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations saved for backward",
    "inputs": "inputs",
    "temporaries": "temporaries",
    "other": "other (alive before the step)",
}
# The .txt report's per-layer table: (title, LayerMemory attribute).
TEXT_COLUMNS = (
    ("Peak (fwd)", "peak"),
    ("Self alloc", "self_alloc"),
    ("Self freed", "self_freed"),
    ("Net (self)", "self_net"),
    ("Saved", "saved"),
    ("Saved once", "saved_unique"),
    ("Saved made", "saved_alloc"),
    ("Saved params", "saved_params"),
    ("Peak (bwd)", "backward_peak"),
    ("Bwd self alloc", "backward_self_alloc"),
    ("Bwd self freed", "backward_self_freed"),
)


def layer_name(path: str | None, session: ProfileSession) -> str:
    if path is None:
        return outside_label(session)
    return path or "(root)"


def where_text(peak: StepPeak, session: ProfileSession) -> str:
    """Where the step peaked, as a sentence part: "in the backward of head [AddmmBackward0]"."""
    node = f" [{peak.node}]" if peak.node else ""
    if peak.phase == "start":
        return "at the step's start (nothing in the step rose above it)"
    if peak.phase == "optimizer":
        return f"in the optimizer step{node}"
    if peak.phase == "outside":
        return f"in {outside_label(session)}"
    return f"in the {peak.phase} of {layer_name(peak.path, session)}{node}"


def start_text(device: DeviceMemory) -> str:
    """What the live bytes count on this device, as a clause."""
    if device.start_exact:
        return (
            "live bytes are the caching allocator's own count of the bytes held by tensors "
            "(allocated); reserved bytes are what it holds from the driver, cache included"
        )
    return (
        "live bytes are those known to hybridprof: the parameters, buffers, gradients, "
        "optimizer state and inputs alive at the step's start and what the step allocates "
        "(the CPU allocator keeps no total)"
    )


def peak_line(device: DeviceMemory, session: ProfileSession) -> str:
    peak = device.peak
    total = device.timeline.end_us if device.timeline is not None else None
    when = f"at {format_time_us(peak.time_us)}" + (f" of {format_time_us(total)}" if total else "")
    reserved = ""
    if peak.reserved_bytes is not None:
        cached = peak.reserved_bytes - peak.live_bytes
        reserved = (
            f" allocated, {format_bytes(peak.reserved_bytes)} reserved by the caching allocator "
            f"({format_bytes(max(cached, 0))} of it cached, not tensors)"
        )
    return (
        f"step peak {format_bytes(peak.live_bytes)}{reserved} {when}, {where_text(peak, session)}; "
        f"{format_bytes(peak.above_start_bytes)} above the step's start "
        f"({format_bytes(device.start_bytes)})"
    )


def categories_text(parts: MemoryBytes) -> str:
    return ", ".join(f"{LABELS[name]} {format_bytes(n)}" for name, n in parts.items())


def keepers(table: LayerTable, count: int = KEEPERS) -> list[LayerRow]:
    """The rows keeping most for backward (each storage counted once, at its first saver)."""
    rows = [r for r in table.rows if r.memory is not None and r.memory.saved_unique > 0]
    return sorted(rows, key=lambda r: -(r.memory.saved_unique if r.memory else 0))[:count]


def memory_lines(session: ProfileSession) -> list[str]:
    """The terminal's block: the peak, what was live then, the layers keeping most for
    backward (nothing without the memory section)."""
    table = layer_table(session)
    device = table.memory
    if device is None:
        return []
    counted = (
        "live bytes as the caching allocator counts them"
        if device.start_exact
        else "live bytes known to hybridprof: the CPU allocator keeps no total"
    )
    lines = [f"memory on {device.device} ({counted}):", f"  {peak_line(device, session)}"]
    if device.peak.categories is not None:
        lines.append(f"  live then: {categories_text(device.peak.categories)}")
    kept = keepers(table)
    if kept:
        lines.append(
            "  kept most for backward: "
            + ", ".join(
                f"{r.name if r.kind == 'outside' else r.path or '(root)'} "
                f"{format_bytes(r.memory.saved_unique if r.memory else 0)}"
                for r in kept
            )
        )
    elif not session.backward:
        lines.append("  nothing saved for backward (forward under no_grad; use --backward)")
    assert session.memory is not None
    for other in session.memory.devices[1:]:
        lines.append(
            f"  {other.device}: step peak {format_bytes(other.peak.live_bytes)}, "
            f"{where_text(other.peak, session)}"
        )
    return lines


def memory_section(session: ProfileSession) -> list[str]:
    """The .txt report's section: the block, every layer's figures, the peak by allocating
    layer and the notes."""
    table = layer_table(session)
    device = table.memory
    if device is None:
        return []
    body = [
        [r.name if r.kind == "outside" else r.path or "(root)"]
        + [format_bytes(getattr(r.memory, attr)) for _, attr in TEXT_COLUMNS]
        for r in table.rows
        if r.memory is not None
    ]
    lines = ["", *memory_lines(session), "", f"memory per layer on {device.device}, per step:"]
    lines.append(format_table(["Layer", *(title for title, _ in TEXT_COLUMNS)], body))
    shares = device.peak.by_layer
    if shares:
        lines += ["", "live at the peak, by the layer that allocated it:"]
        lines.append(
            format_table(
                ["Allocated in", "Layer", "Bytes", "Of it activations"],
                [
                    [
                        "before the step" if s.phase == "start" else s.phase,
                        "" if s.phase == "start" else layer_name(s.path, session),
                        format_bytes(s.bytes),
                        format_bytes(s.categories.activations),
                    ]
                    for s in shares
                ],
            )
        )
    memory = session.memory
    assert memory is not None
    notes = [*memory.notes, *device.notes]
    lines += [f"memory note: {n}" for n in notes]
    lines.append(f"memory measured by {memory.method}")
    return lines


__all__ = [
    "LABELS",
    "categories_text",
    "keepers",
    "layer_name",
    "memory_lines",
    "memory_section",
    "peak_line",
    "start_text",
    "where_text",
]
