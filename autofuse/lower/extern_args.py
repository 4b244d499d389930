"""Operand layouts that some ATen kernels demand of their inputs.

Note: CUDA's memory-efficient attention reads its additive mask (`attn_bias`) with vector loads
and refuses one whose strides are not multiples of 16 bytes ("attn_bias is not correctly aligned
(strideH)"); a mask realized densely over a sequence of 11 has row stride 11. Such an operand is
written into a buffer whose rows are padded to a multiple of 16 elements (as Inductor does), and
the extern call reads that.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..ir.values import ComputedBuffer, Layout, PointwiseBody, is_tensor_value

aten = torch.ops.aten
ALIGN_ELEMENTS = 16

# op -> positions of the operands whose strides must be multiples of ALIGN_ELEMENTS
ALIGNED_OPERANDS: dict[object, tuple[int, ...]] = {
    aten._scaled_dot_product_efficient_attention.default: (3,),
    aten._scaled_dot_product_efficient_attention_backward.default: (4,),
}


def is_aligned(layout: Layout) -> bool:
    """Every stride but the innermost, and the offset, a multiple of ALIGN_ELEMENTS (0 counts)."""
    return layout.offset % ALIGN_ELEMENTS == 0 and all(s % ALIGN_ELEMENTS == 0 for s in layout.stride[:-1]) \
        and (not layout.stride or layout.stride[-1] == 1)


def padded_layout(device: torch.device, dtype: torch.dtype, size: Sequence[int]) -> Layout:
    """Row-major strides with the innermost row padded to a multiple of ALIGN_ELEMENTS."""
    size = tuple(int(s) for s in size)
    strides = [0] * len(size)
    acc = 1
    for d in range(len(size) - 1, -1, -1):
        strides[d] = acc
        extent = size[d]
        if d == len(size) - 1:
            extent = -(-extent // ALIGN_ELEMENTS) * ALIGN_ELEMENTS
        acc *= max(extent, 1)
    return Layout(device, dtype, size, tuple(strides))


def align_operands(g: Any, target: object, args: tuple) -> tuple:
    """`args` with each operand the op needs aligned written into a padded buffer (if it is not)."""
    positions = ALIGNED_OPERANDS.get(target)
    if not positions:
        return args
    out = list(args)
    for i in positions:
        v = out[i] if i < len(out) else None
        if not is_tensor_value(v):
            continue
        layout = getattr(v, "layout", None)
        if layout is not None and is_aligned(layout):
            continue
        buf = ComputedBuffer(g.new_name(), padded_layout(v.device, v.dtype, v.size),
                             PointwiseBody(tuple(int(s) for s in v.size), v.loader()),
                             getattr(v, "origins", frozenset()))
        out[i] = g.add_computed(buf)
    return tuple(out)
