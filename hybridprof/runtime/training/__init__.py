"""Profiling the user's own training loop: the schedule of its steps (`schedule.py`) and the
optimizer's ranges a window of steps installs (`hooks.py`); the steps themselves are bracketed by
`runtime/runs/user_steps.py`."""
