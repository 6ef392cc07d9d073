"""The memory section of a merged torchrun session (torch-free): each rank's step peak, and per
layer the median across ranks.

A rank runs out of memory alone, so the merged view keeps what the fullest rank saw in full (its
peak with what was live then, its timeline) and lists every rank's peak beside it; each layer's
figures are the median across the ranks (as the layer table's times are), on each rank's model
device (the first device of its section).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from hybridprof.datamodel import (
    DeviceMemory,
    LayerMemory,
    MemoryProfile,
    ProfileSession,
    RankPeak,
    Stat,
)
from hybridprof.datamodel.memory import LAYER_BYTES


def merge_memory(ordered: Sequence[ProfileSession]) -> MemoryProfile | None:
    """None unless every rank has the memory section."""
    sections = [s.memory for s in ordered]
    if any(m is None or not m.devices for m in sections):
        return None
    memories = [m for m in sections if m is not None]
    firsts = [m.devices[0] for m in memories]
    ranks = [_rank(s) for s in ordered]
    fullest = max(range(len(firsts)), key=lambda i: firsts[i].peak.live_bytes)
    peaks = tuple(
        RankPeak(
            rank=rank,
            device=d.device,
            peak_live_bytes=d.peak.live_bytes,
            phase=d.peak.phase,
            path=d.peak.path,
            peak_reserved_bytes=d.peak.reserved_bytes,
        )
        for rank, d in zip(ranks, firsts, strict=True)
    )
    base = firsts[fullest]
    merged = replace(
        base,
        device=f"{base.device} (rank {ranks[fullest]}, the fullest of {len(ranks)})",
        layers=_median_layers(firsts),
        peak_live_bytes=_across([d.peak_live_bytes.median for d in firsts]),
        peak_above_start_bytes=_across([d.peak_above_start_bytes.median for d in firsts]),
        notes=tuple(f"rank {r}: {n}" for r, d in zip(ranks, firsts, strict=True) for n in d.notes),
    )
    notes = tuple(f"rank {r}: {n}" for r, m in zip(ranks, memories, strict=True) for n in m.notes)
    return replace(
        memories[fullest],
        devices=(merged,),
        notes=(
            "the layers' memory figures are medians across the ranks; the peak, what was live "
            f"then and the timeline are rank {ranks[fullest]}'s, the fullest",
            *notes,
        ),
        rank_peaks=peaks,
    )


def _rank(session: ProfileSession) -> int:
    assert session.rank is not None
    return session.rank.info.rank


def _across(values: list[float]) -> Stat:
    return Stat(float(statistics.median(values)), float(min(values)), float(max(values)))


def _median_layers(devices: Sequence[DeviceMemory]) -> tuple[LayerMemory, ...]:
    """Per path (in the first rank's order, then any only others have), each figure's median
    across the ranks (a rank without the layer counts 0)."""
    paths = list(dict.fromkeys(m.path for d in devices for m in d.layers))
    by_rank = [{m.path: m for m in d.layers} for d in devices]
    layers = []
    for path in paths:
        rows = [found.get(path) for found in by_rank]
        figures = {
            name: round(statistics.median(getattr(r, name) if r else 0 for r in rows))
            for name in LAYER_BYTES
        }
        hidden = any(r.saved_hidden for r in rows if r is not None)
        layers.append(LayerMemory(path, saved_hidden=hidden, **figures))
    return tuple(layers)


__all__ = ["merge_memory"]
