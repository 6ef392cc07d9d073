"""A plan made elsewhere (`hybridprof analyze`, a file, a library user) checked for this model and
this torch before it is run: its paths must exist, and compat choices are probed again."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import UsageError

if TYPE_CHECKING:
    from torch import nn

    from hybridprof.planner.compat import Compat


def checked_plan(
    plan: ProfilePlan, model: nn.Module, compat: Compat, warnings: list[str]
) -> ProfilePlan:
    """A plan from outside (a file, a library user), after checking its selected paths exist in
    `model`; re-probed on another torch. Its warnings are added to `warnings`."""
    _check_each_path_once(plan)
    _check_plan_paths(plan, model)
    warnings.extend(check_plan_compat(plan))
    fresh = compat.choices()
    if plan.torch_version != compat.torch_version or plan.compat != fresh:
        plan = replace(plan, compat=fresh, torch_version=compat.torch_version)
    return plan


def _check_each_path_once(plan: ProfilePlan) -> None:
    """A path listed twice would be measured as two layers: two records of one path, and shares
    that add up to more than the whole (hybridprof's plans list each module once)."""
    first: dict[str, int] = {}
    for index, target in enumerate(plan.targets):
        if target.path in first:
            shown = repr(target.path[:80]) if target.path else "'' (the root)"
            raise UsageError(
                f"the plan lists the path {shown} twice (targets[{first[target.path]}] and "
                f"targets[{index}]); make the plan again with `hybridprof analyze`"
            )
        first[target.path] = index


def _check_plan_paths(plan: ProfilePlan, model: nn.Module) -> None:
    selected = plan.selected_paths()
    if not selected:
        raise UsageError(
            "the plan selects no module; select some with `hybridprof analyze --paths`"
        )
    from hybridprof.planner.module_tree import named_modules  # imports torch: only once needed

    known = {path for path, _ in named_modules(model)}
    missing = [path for path in selected if path not in known]
    if not missing:
        return
    many = len(missing) > 1
    shown = ", ".join(repr(p) for p in missing[:5]) + (", ..." if len(missing) > 5 else "")
    made_for = f", the plan was made for {plan.root_class}" if plan.root_class else ""
    raise UsageError(
        f"the plan's {'paths' if many else 'path'} {shown} {'are' if many else 'is'} not in "
        f"this model ({type(model).__name__}{made_for}); "
        "make a plan for this model with `hybridprof analyze`"
    )


def check_plan_compat(plan: ProfilePlan) -> list[str]:
    """Warnings for running `plan` here: another torch version (choices re-probed) or
    static-only."""
    import torch

    from hybridprof.planner.compat import probe

    warnings: list[str] = []
    here = str(torch.__version__)
    if plan.torch_version and plan.torch_version != here:
        warnings.append(
            f"the plan was made with torch {plan.torch_version}, this is torch {here}: "
            "compatibility choices were probed again"
        )
    fresh = {c.name: c.value for c in probe().choices()}
    for choice in plan.compat:
        now = fresh.get(choice.name)
        if now is not None and now != choice.value:
            warnings.append(f"compat '{choice.name}' is now '{now}' (plan says '{choice.value}')")
    if plan.static_only:
        warnings.append(
            "the plan is static-only (made without running the model file): its paths come "
            "from the source and are checked against the live model"
        )
    return warnings


__all__ = ["check_plan_compat", "checked_plan"]
