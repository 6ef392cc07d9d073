"""The FLOP formulas the counter uses: torch.utils.flop_counter's registry, with three changes.

- `aten.convolution_backward`: torch's formula ignores `groups` when it counts the weight
  gradient (it convolves the input with the output gradient as if every input channel met every
  output channel), so a depthwise convolution's backward reads about `channels` times its real
  work and the roofline said "compute-bound at 900% of peak". Each gradient of a convolution does
  the forward's multiply-adds once more (every product of the forward appears once in the input
  gradient and once in the weight gradient), so each gradient asked for counts the forward's
  FLOPs, whose formula does count `groups` (the weight's second dimension is in_channels/groups).
- `aten._scaled_dot_product_flash_attention_for_cpu` and its backward: the fused attention that
  `F.scaled_dot_product_attention` runs on CPU has no formula in torch, so attention read 0 FLOPs
  and "overhead-bound". It does the arithmetic of the CUDA kernels and gets their formulas.

The formulas take shapes, as torch's do (`flop_counter.shape_wrapper` turns tensors into shapes),
so `FlopCounterMode(custom_mapping=EXTRA_FORMULAS)` counts exactly what hybridprof counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import flop_counter

aten = torch.ops.aten
Shape = Sequence[int]


def grouped_conv_backward_flop(
    grad_out_shape: Shape,
    x_shape: Shape,
    w_shape: Shape,
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: int,
    output_mask: Sequence[bool],
    out_shape: Any = None,
    **kwargs: Any,
) -> int:
    """The input and weight gradients asked for (`output_mask`), each the forward's FLOPs."""
    forward = flop_counter.conv_flop_count(
        list(x_shape), list(w_shape), list(grad_out_shape), transposed
    )
    return int(forward) * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def sdpa_cpu_flop(
    query_shape: Shape, key_shape: Shape, value_shape: Shape, *args: Any, **kwargs: Any
) -> int:
    """The fused CPU attention's forward: the two batched matmuls, as torch counts the CUDA one."""
    count = flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    return int(count)


def sdpa_cpu_backward_flop(
    grad_out_shape: Shape,
    query_shape: Shape,
    key_shape: Shape,
    value_shape: Shape,
    *args: Any,
    **kwargs: Any,
) -> int:
    """Its backward, as torch counts the CUDA kernels' backward."""
    count = flop_counter.sdpa_backward_flop_count(  # type: ignore[no-untyped-call]  # unannotated
        grad_out_shape, query_shape, key_shape, value_shape
    )
    return int(count)


EXTRA_FORMULAS: dict[Any, Callable[..., int]] = {
    aten.convolution_backward: grouped_conv_backward_flop,
    aten._scaled_dot_product_flash_attention_for_cpu: sdpa_cpu_flop,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: sdpa_cpu_backward_flop,
}


def flop_registry() -> dict[Any, Callable[..., int]]:
    """op packet -> formula taking the op's arguments and `out_val`, as FlopCounterMode calls it."""
    wrap: Callable[[Callable[..., int]], Callable[..., int]] = flop_counter.shape_wrapper
    extra = {op: wrap(f) for op, f in EXTRA_FORMULAS.items()}
    return {**flop_counter.flop_registry, **extra}


__all__ = [
    "EXTRA_FORMULAS",
    "flop_registry",
    "grouped_conv_backward_flop",
    "sdpa_cpu_backward_flop",
    "sdpa_cpu_flop",
]
