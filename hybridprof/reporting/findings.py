"""Planner findings grouped for display: one code line in many module instances is one finding."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from hybridprof.datamodel import Finding

GROUP_AT = 4  # this many findings of one kind from one source line print as one


@dataclass(frozen=True, slots=True)
class FindingGroup:
    finding: Finding  # the first of the group: kind, message and source stand for all
    paths: tuple[str, ...]

    def paths_text(self) -> str:
        """`0`, or `0, 1, 2 and 997 more` for a big group; the root shows as (root)."""
        shown = [p or "(root)" for p in self.paths]
        if len(shown) < GROUP_AT:
            return ", ".join(shown)
        return f"{', '.join(shown[:3])} and {len(shown) - 3} more"


def group_findings(findings: Sequence[Finding]) -> list[FindingGroup]:
    """Findings of one kind from one source line (a 1,000-block stack repeats each fact 1,000
    times) are grouped when there are GROUP_AT or more; others stay one per path."""
    groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        key = (finding.kind, finding.span.short() if finding.span else f"path:{finding.path}")
        groups[key].append(finding)
    result: list[FindingGroup] = []
    for group in groups.values():
        if len(group) < GROUP_AT:
            result += [FindingGroup(f, (f.path,)) for f in group]
        else:
            result.append(FindingGroup(group[0], tuple(f.path for f in group)))
    return result
