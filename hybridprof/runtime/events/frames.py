"""The frame of one event while a thread's events are walked (`attribution.py`), and its slots.

A frame is an open or closed CPU event while walking one thread's tree. Thousands are made per
iteration, so a frame is a plain list indexed by these constants (a list literal is several times
cheaper to build than an object whose __init__ sets the same fields).
"""

from __future__ import annotations

from typing import Any

Frame = list[Any]  # indexed by the constants below

EVENT, CHAIN, BWD, RANGE, KIND, CHILD_NS, MEM, CHILD_MEM, DMEM, CHILD_DMEM = range(10)
NESTED_NS, NESTED_MEM, NESTED_DMEM, RAW, MEASURE, PARENT, SOLE, OPT = range(10, 18)
# KIND values. HOST: an op that recomputed. MERGED: an op nested as the only child of an op of the
# same name (Dropout's aten::div_ inside aten::div_); torch's event tree drops it and lifts its
# children into the parent, so it is counted once, and so it is here (see `_absorb`).
OP, LAYER, BWD_ROOT, RECOMPUTE, HOST, MERGED = range(6)
# HOOKS: the range around a tensor-parallel layer's call, its hooks included
# (`events/tp_names.py`); HOOKED: that layer's own range inside it. The two are one call of the
# layer: HOOKS counts no call, HOOKED adds no total (its HOOKS range's holds it).
HOOKS, HOOKED = range(6, 8)
# SERVED: an FSDP2 range inside a backward node, working for unit u (its pre-backward gather, a
# prefetch for it, its reduce-scatter): u's backward time, taken out of the node's layer. In the
# forward such a range is a HOOKS range of u. (`attribution._open_served`)
SERVED = 8
# SOLE: None until a child closes, then that child, then False once a second one has closed.
# OPT: None outside the optimizer; inside one of its parts (`optimizer_fold.py`), the part's name
# and the record of the optimizer step it runs in (None outside a step: clipping, zero_grad).

__all__ = [
    "BWD",
    "BWD_ROOT",
    "CHAIN",
    "CHILD_DMEM",
    "CHILD_MEM",
    "CHILD_NS",
    "DMEM",
    "EVENT",
    "HOOKED",
    "HOOKS",
    "HOST",
    "KIND",
    "LAYER",
    "MEASURE",
    "MEM",
    "MERGED",
    "NESTED_DMEM",
    "NESTED_MEM",
    "NESTED_NS",
    "OP",
    "OPT",
    "PARENT",
    "RANGE",
    "RAW",
    "RECOMPUTE",
    "SERVED",
    "SOLE",
    "Frame",
]
