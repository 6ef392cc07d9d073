"""The library facade: `Profile` (torchprof's context manager) and `profile()` (a whole run).

The top layer, beside the CLI: it may use every layer below it (runtime, planner, reporting, the
data model); nothing below imports it.
"""

from __future__ import annotations

from hybridprof.api.profile_call import profile
from hybridprof.api.profiler import Profile, Trace
from hybridprof.reporting import install_views

install_views()  # sessions handed out from here show as HTML and give DataFrames

__all__ = ["Profile", "Trace", "profile"]
