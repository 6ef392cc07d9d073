"""Per-layer figures across commits: which commit made which layer slower, found without asking.

`hybridprof history add` keeps a session's per-layer figures (medians and intervals, shares, FLOPs
and memory where measured) in one SQLite file, keyed by commit, branch, machine fingerprint and
model (`store`); `history show` reads a window of recent commits of one series (one machine, one
model, one branch) and finds the change points of each layer (`change_points`, with ruptures'
PELT); `history bisect` halves the commits between a good and a bad one (`bisect_search`).

Torch-free: the store reads sessions through `hybridprof.files.storage` and the layer table, and
nothing here measures.
"""
