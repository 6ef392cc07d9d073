"""The FLOP formulas the counter uses: torch.utils.flop_counter's registry, with these changes.

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
- The normalisations (batch, layer and group norm, forward and backward) have no formula in torch,
  so a BatchNorm read "0 FLOP". Per element of the input: the statistics, when the op computes
  them (a mean and a variance: 4 FLOPs; an eval-mode BatchNorm reads its running ones instead),
  and the normalisation with its scale and shift (subtract, multiply, then multiply and add:
  4 FLOPs). A backward counts twice its forward, as a gradient of each step is worked out.

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


STATS_FLOPS = 4  # per element: the mean (an add) and the variance (subtract, square, add)
NORMALISE_FLOPS = 4  # per element: subtract the mean, multiply by 1/std, scale and shift


def _elements(shape: Shape) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def batch_norm_flop(input_shape: Shape, *args: Any, **kwargs: Any) -> int:
    """A batch norm's forward (`native_batch_norm`, `_native_batch_norm_legit`): the statistics
    too when it trains (its `training` flag, the first bool among its arguments)."""
    training = next((a for a in args if isinstance(a, bool)), True)
    return _elements(input_shape) * (NORMALISE_FLOPS + (STATS_FLOPS if training else 0))


def batch_norm_eval_flop(input_shape: Shape, *args: Any, **kwargs: Any) -> int:
    """`_native_batch_norm_legit_no_training`: the running statistics, no new ones."""
    return _elements(input_shape) * NORMALISE_FLOPS


def norm_flop(input_shape: Shape, *args: Any, **kwargs: Any) -> int:
    """A layer or group norm's forward: its statistics and the normalisation."""
    return _elements(input_shape) * (STATS_FLOPS + NORMALISE_FLOPS)


def norm_backward_flop(grad_out_shape: Shape, *args: Any, **kwargs: Any) -> int:
    """A normalisation's backward: twice its forward."""
    return 2 * _elements(grad_out_shape) * (STATS_FLOPS + NORMALISE_FLOPS)


EXTRA_FORMULAS: dict[Any, Callable[..., int]] = {
    aten.native_batch_norm: batch_norm_flop,
    aten._native_batch_norm_legit: batch_norm_flop,
    aten._native_batch_norm_legit_no_training: batch_norm_eval_flop,
    aten.native_layer_norm: norm_flop,
    aten.native_group_norm: norm_flop,
    aten.native_batch_norm_backward: norm_backward_flop,
    aten.native_layer_norm_backward: norm_backward_flop,
    aten.native_group_norm_backward: norm_backward_flop,
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
    "batch_norm_eval_flop",
    "batch_norm_flop",
    "flop_registry",
    "grouped_conv_backward_flop",
    "norm_backward_flop",
    "norm_flop",
    "sdpa_cpu_backward_flop",
    "sdpa_cpu_flop",
]
