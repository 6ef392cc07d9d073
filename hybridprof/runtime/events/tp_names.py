"""Tensor parallel (DTensor) communication in the profiler's events: what names it, and the range
hybridprof opens around a tensor-parallel layer's hooks.

`parallelize_module` makes a layer tensor parallel through two module hooks (DTensor's
`distribute_module`): a forward pre-hook that turns the inputs into DTensors (`_FromTorchTensor`,
`Redistribute`) and a forward hook that redistributes the output (a row-parallel layer's partial
sums all-reduced there). Both run outside the layer's patched `forward`, so hybridprof opens a
range of its own around the whole call, hooks included (`TP_HOOKS_PREFIX` + the path), and the
walk counts what runs in it as the layer's (`runtime/distributed/tp_layers.py` opens it).

The collectives are torch's functional ones (`_c10d_functional::all_reduce`, ...): each op issues
one and returns at once; `_c10d_functional::wait_tensor` waits for it, in the same layer or at the
result's first use (the next layer's matmul, or the loss). The backend's worker thread runs the
transfer (`gloo:all_reduce`): no time of the profiled thread, so the walk leaves it out. In
backward, the collective of a DTensor's gradient runs in its node (`_FromTorchTensorBackward`),
issued and waited for there. Torch-free.
"""

from __future__ import annotations

TP_HOOKS_PREFIX = "hybridprof::tp_hooks "

# Functional collectives a DTensor redistribution issues (their first input: the tensor sent).
COLLECTIVES = frozenset(
    f"_c10d_functional::{name}"
    for name in (
        "all_reduce",
        "all_reduce_",
        "all_reduce_coalesced",
        "all_gather_into_tensor",
        "all_gather_into_tensor_coalesced",
        "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced",
        "all_to_all_single",
        "broadcast",
    )
)
WAIT = "_c10d_functional::wait_tensor"
# The backend's own thread, doing a collective's transfer while the profiled thread goes on.
BACKEND_PREFIXES = ("gloo:",)


# Element sizes of the dtype names the profiler records with shapes (`record_shapes`).
_ITEMSIZE = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
    "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
    "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
}  # fmt: skip
SIZED = COLLECTIVES | {WAIT}  # the events whose first input's bytes are read


def first_input_bytes(shapes: list[list[int]], dtypes: list[str]) -> int:
    """The bytes of an op's first input, from its recorded shape and dtype; 0 when unknown."""
    if not shapes or not dtypes:
        return 0
    count = 1
    for size in shapes[0]:
        count *= size
    return count * _ITEMSIZE.get(dtypes[0], 0)


def tp_hooks_range(path: str) -> str:
    """The range around a tensor-parallel layer's call, its hooks included."""
    return TP_HOOKS_PREFIX + path


def tp_hooks_path(name: str) -> str | None:
    """The layer a hooks range is of; None for every other name."""
    return name[len(TP_HOOKS_PREFIX) :] if name.startswith(TP_HOOKS_PREFIX) else None


def is_backend_event(name: str) -> bool:
    return name.startswith(BACKEND_PREFIXES)


__all__ = [
    "COLLECTIVES",
    "SIZED",
    "TP_HOOKS_PREFIX",
    "WAIT",
    "first_input_bytes",
    "is_backend_event",
    "tp_hooks_path",
    "tp_hooks_range",
]
