"""Measuring: patch the selected modules' `forward`, run the model, restore, build the session.

Uses the planner (compat, module tree) and the data model; never reporting or the facade above.
Inside, floors (each imports only those below it, enforced by tests/unit/test_layers.py):

    runs/                 the ways a run is driven: fixed, paired, speedup, the user's steps
    compiled/ memory/ flops/ distributed/ training/
                          the features, beside each other (none imports another)
    strategies/           the ways of measuring a layer call, behind one protocol
    events/               the profiler's events attributed to layers
    measures/             what one iteration measured, and the iterations summarised
    basics/               small modules that import nothing else of the runtime
"""
