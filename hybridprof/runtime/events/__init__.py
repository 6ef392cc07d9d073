"""The profiler's events after an iteration: read cheaply (`kineto`, `columns`), attributed to the
layer ranges forward and backward (`attribution`), folded per call (`function_events`, for the
per-call strategy), and turned into torch `EventList`s for `raw()` (`event_lists`)."""
