"""Measuring: patch the selected modules' `forward`, run the model, restore, build the session.

Uses the planner (compat, module tree) and the data model; never reporting or the facade above.
The ways of measuring are in `runtime/strategies/`.
"""
