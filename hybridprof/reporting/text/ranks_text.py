"""A merged torchrun session's ranks in words: the lines `hybridprof report` prints and the .txt
report carries (each rank's step and communication, the stragglers, the communication rows)."""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.reporting.format import format_bytes, format_time_us, visible


def rank_lines(merged: ProfileSession) -> list[str]:
    """Per rank: step time and communication; then stragglers and the communication rows."""
    ranks = merged.ranks
    if ranks is None:
        return []
    lines = [f"ranks: {ranks.world_size} (figures above: median across ranks)"]
    for r in ranks.ranks:
        lines.append(
            f"  rank {r.info.rank} ({r.info.host}, {r.info.device}, {r.info.backend}): step "
            f"{format_time_us(r.step_us.median)}, communication {format_time_us(r.comm_us.median)}"
            f" ({r.comm_share:.0%} of the step), waiting for other ranks "
            f"{format_time_us(r.waiting_us)}"
        )
    for s in ranks.stragglers:
        lines.append(
            f"straggler: rank {s.rank} on {s.path or '(root)'}: {format_time_us(s.rank_us)} "
            f"against {format_time_us(s.others_us)} on the other ranks"
        )
    for c in merged.collectives:
        size = f", {format_bytes(c.nbytes)}" if c.nbytes else ""
        where = f" in {c.layer}" if c.layer else ""
        lines.append(f"comm: {c.name}{where}: {format_time_us(c.time_us.median)}{size}")
    return [visible(line) for line in lines]  # names from the file: a newline would forge a line


__all__ = ["rank_lines"]
