"""Profiling the user's own training loop in a with-block: the schedule of its steps, what a
window of steps installs and when (`loop.py`), the optimizer's ranges (`hooks.py`)."""
