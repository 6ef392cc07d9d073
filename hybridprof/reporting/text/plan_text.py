"""A plan as a text tree for the terminal: what will be measured, what will not, and why."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from hybridprof.datamodel import Finding, FindingKind, ModuleTarget, ProfilePlan
from hybridprof.reporting.findings import group_findings
from hybridprof.reporting.format import visible_lines

SELECTED, SKIPPED = "[x]", "[ ]"


MAX_ROWS = 120  # a terminal's worth; the saved plan always holds every module


def render_plan(
    plan: ProfilePlan, base: str | None = None, max_rows: int = MAX_ROWS, compat: bool = True
) -> str:
    """The whole plan: header, tree, findings, and (`compat`) the torch-compatibility choices, an
    internal detail `analyze` prints only under --verbose. `base` shortens source paths.

    A big model (a 1,000-block stack) would print thousands of rows and the same finding a
    thousand times, so the tree stops after `max_rows` rows (0: no limit) and findings made by one
    source line are printed once with the paths they concern.
    """
    lines = [_header(plan), ""]
    tree = render_tree(plan, base)
    if 0 < max_rows < len(tree):
        hidden = plan.targets[max_rows:]
        chosen = sum(t.selected for t in hidden)
        tree = [
            *tree[:max_rows],
            f"... {len(hidden)} more modules ({chosen} selected): the saved plan lists every "
            "module; --max-rows 0 prints them all",
        ]
    lines += tree
    if plan.findings:
        lines += ["", "findings:"]
        lines += [f"  {line}" for line in _finding_lines(plan.findings, base)]
    if compat and plan.compat:
        lines += ["", f"compat (torch {plan.torch_version or '?'}):"]
        lines += [f"  {c.name} = {c.value}: {c.reason}" for c in plan.compat]
    return visible_lines(lines) + "\n"


def render_tree(plan: ProfilePlan, base: str | None = None) -> list[str]:
    """One line per target, indented by depth: mark, path, class, calls, source, reason, flags."""
    flags = _flags(plan.findings)
    rows = [_row(t, base, flags.get(t.path, ())) for t in plan.targets]
    width = max((len(r[0]) for r in rows), default=0)
    cls_width = max((len(r[1]) for r in rows), default=0)
    return [
        f"{path.ljust(width)}  {cls.ljust(cls_width)}  {rest}".rstrip() for path, cls, rest in rows
    ]


def _header(plan: ProfilePlan) -> str:
    selected = len(plan.selected_paths())
    kind = "static-only plan" if plan.static_only else "plan"
    where = f" from {Path(plan.model_file).name}" if plan.model_file else ""
    return (
        f"{kind} for {plan.root_class}{where}: {selected} of {len(plan.targets)} modules selected, "
        f"strategy {plan.strategy}"
    )


def _row(target: ModuleTarget, base: str | None, flags: tuple[str, ...]) -> tuple[str, str, str]:
    mark = SELECTED if target.selected else SKIPPED
    name = target.path.rpartition(".")[2] if target.path else "(root)"
    path = f"{mark} {'  ' * target.depth}{name}"
    calls = "calls ?" if target.expected_calls is None else f"calls {target.expected_calls}"
    source = _short(target.source.short(), base) if target.source else "-"
    extra = f"  [{', '.join(flags)}]" if flags else ""
    aliases = f"  aka {', '.join(target.aliases)}" if target.aliases else ""
    return path, target.class_name, f"{calls:<8} {source}  ({target.reason}){aliases}{extra}"


def _flags(findings: tuple[Finding, ...]) -> dict[str, tuple[str, ...]]:
    flags: dict[str, list[str]] = defaultdict(list)
    for finding in findings:
        kind = finding.kind.value
        if finding.kind is not FindingKind.STATIC_ONLY and kind not in flags[finding.path]:
            flags[finding.path].append(kind)
    return {path: tuple(kinds) for path, kinds in flags.items()}


def _finding_lines(findings: tuple[Finding, ...], base: str | None) -> list[str]:
    """One line per finding; many of one kind from one source line become one line."""
    return [_finding(g.finding, base, g.paths_text()) for g in group_findings(findings)]


def _finding(finding: Finding, base: str | None, paths: str | None = None) -> str:
    where = f" ({_short(finding.span.short(), base)})" if finding.span else ""
    path = paths or finding.path or "(root)"
    return f"{finding.kind.value}: {path}: {finding.message}{where}"


def _short(location: str, base: str | None) -> str:
    """Paths under `base` (the model's folder) relative; library files by their last parts."""
    if base and location.startswith(base.rstrip("/") + "/"):
        return location[len(base.rstrip("/")) + 1 :]
    if "site-packages/" in location:
        return location.split("site-packages/", 1)[1]
    return location


__all__ = ["render_plan", "render_tree"]
