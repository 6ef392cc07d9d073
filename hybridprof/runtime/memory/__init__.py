"""Memory per layer, measured: peaks, own allocations and frees, bytes saved for backward, in
forward and backward, and the step's peak with what was live then (`--profile-memory`).

The profiler's allocation events (`profile_memory=True`) carry every allocation and free with its
time, size, device and thread. Replayed against the layer ranges the session strategy already
opens (and the autograd nodes and optimizer ranges torch records), they give each layer's figures;
a saved-tensor hooks pair gives what each layer's forward saves for backward. The pieces:

- capture.py: the hooks around each measured step (saved tensors, gradients, what is alive at
  the start), installed once per run; handed to the session strategy as its `MemoryHooks`;
- records.py: what the hooks noted in one step, as data;
- allocations.py: the events as columns, and the allocation addresses from the profiler's event
  tree;
- contexts.py: which layer call, autograd node or optimizer range each allocation happened in;
- layers.py: the per-layer figures and the step's peak, from the live curve;
- lifetimes.py: each storage's lifetime and category, for what was alive at the peak;
- timeline.py: the downsampled curve and the lanes beneath it;
- replay.py: one iteration worked out.

What the replay hands on (`measures/memory_figures.py`) and the iterations summarised into the
session's `MemoryProfile` (`measures/memory_table.py`) sit with the other measures, below the
strategies and the events.
"""
