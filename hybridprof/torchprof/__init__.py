"""torchprof 1.4.0's API on hybridprof: change the import, keep the code.

    import hybridprof.torchprof as torchprof

    with torchprof.Profile(model, use_cuda=False, profile_memory=True) as prof:
        model(x)
    print(prof)
    traces, event_lists_dict = prof.raw()   # torch EventLists of FunctionEvents, per call

`Profile` takes torchprof's arguments only and, as torchprof did, ignores a `paths` entry that
names no module (with a warning naming the closest paths; `hybridprof.Profile` raises instead).
`profile.walk_modules` and `display.traces_to_display` keep torchprof's signatures.
"""

from __future__ import annotations

from hybridprof.torchprof import display, profile
from hybridprof.torchprof.profile import Profile, Trace, walk_modules

name = "torchprof"

__all__ = ["Profile", "Trace", "display", "profile", "walk_modules"]
