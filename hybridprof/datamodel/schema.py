"""The versions and kinds of the files the data model is saved as, and the default strategy.

Schema history: 2 added the optional `flops` object of a session (absent without --flops); 3 added
each record's per-iteration series (`ModuleRecord.per_iteration`), the session's `stability`,
`requested_warmup`, `stop_reason`, `max_time_s` and "auto" iteration counts; 4 writes sessions
compact: no whitespace, no field equal to its default (zeros, empty, None), a `Stat` as
[median, min, max] and a record's ops as columns (`OpStat.json_columns`); 5 added optional parts:
a training loop's `optimizer` record, `steps` and `schedule`, and the `memory` section
(`--profile-memory`: per-layer memory and the step's peak, `datamodel.memory`, with a version of
its own); each is absent otherwise; 6 added the iterations' waits for a CPU (`cpu_waits`: what
the scheduler took, which iterations were excluded for it) and the stability's
`threads_exceed_free_cores`; 7 added an FSDP2-sharded model's communication per unit (`fsdp`,
`datamodel.ranks.UnitComm`; absent otherwise); 8 added the ops of the time in no layer
(`outside_ops`: the `(outside modules)` row's breakdown; absent when empty); 9 added the
tensor-parallel layers' communication (`tp`, `UnitComm` with its `group`; absent otherwise); 10
added the compile section's `cache_hits` and `cache_rebuilt` (graphs inductor's cache answered,
and those compiled again for want of a kernel map; absent when 0); 11 added each FSDP2 unit's
time per iteration and its exposed part (`UnitComm.iteration_us`, `exposed_us`), and in a merged
session each rank's wait in the unit's collectives and the rank waited for (`wait_us`,
`waited_for`); absent in older files; 12 added the profiler's calibrated cost per event and per
layer call (`calibration`, `datamodel.Calibration`), which the layer table takes out of each row;
absent in older files, whose rows stay the raw figures; 13 added the calibration's bare cost of
calling a module (`Calibration.call_us`), moved from each caller's self time into the layer's;
absent in older files (nothing moved). The reader takes every form, so files of versions 1-12
still load.
"""

from __future__ import annotations

SCHEMA_VERSION = 13
# The strategy a plan and a run use unless told otherwise (the registry in runtime/strategies/
# lists them all); defined here, the lowest layer, so planner, runtime and CLI share one name.
DEFAULT_STRATEGY = "session"
PLAN_KIND = "hybridprof-plan"
SESSION_KIND = "hybridprof-session"
