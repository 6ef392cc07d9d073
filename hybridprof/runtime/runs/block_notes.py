"""What a with-block's session says about its steps beyond the numbers: its warnings, and whether
the measured steps' times have converged (`prof.converged`)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from hybridprof.runtime.basics.stopping import IterationRule
from hybridprof.runtime.runs.user_steps import MAX_MEASURED_STEPS, UserSteps

# `--iters auto`'s rule, asked only whether the times so far have converged.
_AUTO = IterationRule.of(0, "auto", None)


def converged(step_us: Sequence[float]) -> bool:
    """At least 5 steps, and their median's 95% confidence interval within ±3% of it."""
    return _AUTO.stop_reason(step_us, 0.0) == "converged"


def grads_state(model: nn.Module) -> list[tuple[int, int]]:
    """Which gradient tensor each parameter holds, and its version: a backward pass (or a
    zero_grad) changes it. How a strategy without profiler events tells that a block trained."""
    return [
        (0, -1) if p.grad is None else (id(p.grad), p.grad._version) for p in model.parameters()
    ]


def block_warnings(
    loop: UserSteps, grads_before: list[tuple[int, int]] | None, model: nn.Module
) -> tuple[str, ...]:
    """What the session must say about the block's steps."""
    said: list[str] = []
    if loop.unmeasured:
        said.append(
            f"{loop.unmeasured} more steps were not measured: a session keeps at most "
            f"{MAX_MEASURED_STEPS}; choose the steps to measure with "
            "schedule=hybridprof.schedule(wait=..., warmup=..., active=...)"
        )
    if loop.skipped_steps:
        said.append(
            f"{loop.skipped_steps} scheduled step(s) were not measured: torch.profiler was "
            "running when they began, and hybridprof's profiler cannot run inside it"
        )
    name = loop.driver.strategy_name
    trained = loop.hooks.optimizer_steps > 0 or (
        grads_before is not None and grads_state(model) != grads_before
    )
    if grads_before is not None and trained:
        said.append(
            f"the block ran a backward pass or an optimizer, which strategy '{name}' does not "
            "attribute: the layers show their forward time only, and no row holds the rest; "
            "use strategy 'session' (the default) to see backward and optimizer time"
        )
    return tuple(said)


def module_ids(model: nn.Module) -> dict[str, int]:
    """Each module of `model` by its path: what the block patched is what it found at its start."""
    return {path: id(module) for path, module in model.named_modules()}


def changed_modules_warning(before: dict[str, int], model: nn.Module) -> str | None:
    """What to say when children were added or replaced inside the block: hybridprof measures
    the modules it found as the block began, so the new ones have no row of their own."""
    after = module_ids(model)
    added = _outermost([p for p in after if p not in before])
    replaced = _outermost([p for p in after if p in before and after[p] != before[p]])
    if not added and not replaced:
        return None
    parts = [f"{_names(added)} added"] if added else []
    parts += [f"{_names(replaced)} replaced"] if replaced else []
    return (
        f"the model's modules changed inside the block ({', '.join(parts)}): "
        "hybridprof measures the modules it found when the block began, so these have no row "
        "of their own (their time is their parent's, or in (outside modules)); change the model "
        "before the block"
    )


def _outermost(paths: list[str]) -> list[str]:
    """Paths none of whose ancestors is listed (a new child's own children are new too)."""
    listed = set(paths)
    return [p for p in paths if not any(a in listed for a in _ancestors(p))]


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:4])
    return shown + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")


__all__ = ["block_warnings", "changed_modules_warning", "converged", "grads_state", "module_ids"]
