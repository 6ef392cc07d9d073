"""hybridprof: a layer-by-layer profiler for PyTorch models.

Public API (imported lazily, so `hybridprof --version` does not pay for `import torch`):

- `Profile(model, enabled=True, use_cuda=False, profile_memory=False, paths=None)`: torchprof's
  context manager, on PyTorch 2.x; around a training loop too (`prof.step()`, `schedule=`).
- `schedule(wait=, warmup=, active=, repeat=)`: which steps of a loop a `Profile` measures.
- `plan_model(model, ...)`: the static + tree planner's `ProfilePlan`.
- `profile(model, inputs, ...)`: warm-up + measured iterations -> `ProfileSession`.
- `load_session(path)`: read a saved session for re-rendering.
- `examples`: bundled example models (`hybridprof.examples.alexnet()`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Profile": ("hybridprof.api", "Profile"),
    "Trace": ("hybridprof.api", "Trace"),
    "schedule": ("hybridprof.runtime.training.schedule", "schedule"),
    "Schedule": ("hybridprof.runtime.training.schedule", "Schedule"),
    "plan_model": ("hybridprof.planner.live_plan", "plan_model"),
    "profile": ("hybridprof.api", "profile"),
    "load_session": ("hybridprof.files.storage", "load_session"),
    "load_plan": ("hybridprof.files.storage", "load_plan"),
    "ProfileSession": ("hybridprof.datamodel", "ProfileSession"),
    "ProfilePlan": ("hybridprof.datamodel", "ProfilePlan"),
    "HybridprofError": ("hybridprof.errors", "HybridprofError"),
    "examples": ("hybridprof.examples", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'hybridprof' has no attribute '{name}'")
    module_name, attr = _LAZY[name]
    # Sessions reached through these names (load_session, profile, Profile.session()) show as
    # HTML in notebooks and give DataFrames: importing the reporting layer plugs its views into
    # the data model (cheap: no jinja2, no pandas).
    importlib.import_module("hybridprof.reporting")
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["__version__", *_LAZY]
