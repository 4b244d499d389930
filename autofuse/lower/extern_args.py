"""Operand layouts that some ATen kernels demand of their inputs.

Note: CUDA's memory-efficient attention reads its additive mask (`attn_bias`) with vector loads
and refuses one whose strides are not multiples of 16 bytes ("attn_bias is not correctly aligned
(strideH)"); a mask realized densely over a sequence of 11 has row stride 11. Such an operand is
written into a buffer whose rows are padded to a multiple of 16 elements (as Inductor does), and
the extern call reads that.
"""
from __future__ import annotations

from typing import Any, Sequence

import sympy
import torch

from ..ir.dependence import constant_dims
from ..ir.values import ComputedBuffer, Layout, Pointwise, PointwiseBody, ReinterpretView, is_tensor_value

aten = torch.ops.aten
ALIGN_ELEMENTS = 16

# op -> positions of the operands whose strides must be multiples of ALIGN_ELEMENTS
ALIGNED_OPERANDS: dict[object, tuple[int, ...]] = {
    aten._scaled_dot_product_efficient_attention.default: (3,),
    aten._scaled_dot_product_efficient_attention_backward.default: (4,),
}


# out-of-place ops whose result is their first operand updated: ATen's functional form copies that
# operand first (a scatter into a fresh zeros buffer pays a full device-to-device copy). Where the
# operand is a buffer of the program that nothing else reads, the program calls the in-place form
# on it instead (compiler.ProgramBuilder)
IN_PLACE_FORMS: dict[object, object] = {
    aten.scatter_add.default: aten.scatter_add_.default,
    aten.scatter.src: aten.scatter_.src,
    aten.scatter.value: aten.scatter_.value,
    aten.scatter_reduce.two: aten.scatter_reduce_.two,
    aten.index_put.default: aten.index_put_.default,
    aten.index_add.default: aten.index_add_.default,
    aten.index_copy.default: aten.index_copy_.default,
    aten.masked_scatter.default: aten.masked_scatter_.default,
}


# op -> positions (or keyword names) of operands the kernel reads through their strides: a value
# constant along some dims is stored without them and passed as a view that expands them (stride 0).
# An attention mask built from a padding mask is constant along the query positions: stored whole,
# it costs a write of B x Q x K elements and slows the attention kernel that reads it (see
# docs/design.md, "Capture")
BROADCAST_OPERANDS: dict[object, tuple[int | str, ...]] = {
    aten._scaled_dot_product_efficient_attention.default: (3,),
    aten._scaled_dot_product_cudnn_attention.default: (3,),
    aten._scaled_dot_product_flash_attention_for_cpu.default: ("attn_mask",),
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


def store_broadcast(g: Any, value: Pointwise, aligned: bool = False) -> ReinterpretView | None:
    """The value stored without the dims it is constant along and read as a view that expands them
    (stride 0); None where it depends on every dim. `aligned`: rows padded as ALIGNED_OPERANDS needs."""
    dims = constant_dims(value.inner_fn, value.size)
    if not dims:
        return None
    size = tuple(int(s) for s in value.size)
    small = tuple(1 if d in dims else s for d, s in enumerate(size))
    load, zero = value.loader(), sympy.Integer(0)

    def inner(ops: Any, idx: Sequence[Any]) -> Any:
        return load(ops, [zero if d in dims else i for d, i in enumerate(idx)])

    layout = padded_layout(value.device, value.dtype, small) if aligned else \
        Layout.contiguous(value.device, value.dtype, small)
    buf = g.add_computed(ComputedBuffer(g.new_name(), layout, PointwiseBody(small, inner),
                                        getattr(value, "origins", frozenset())))
    stride = tuple(0 if d in dims else st for d, st in enumerate(layout.stride))
    return ReinterpretView(buf, Layout(value.device, value.dtype, size, stride))


def broadcast_operands(g: Any, target: object, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` with each lazy operand at a BROADCAST_OPERANDS position that is constant
    along some dims stored without them (`store_broadcast`)."""
    where = BROADCAST_OPERANDS.get(target)
    if not where:
        return args, kwargs
    args, kwargs = list(args), dict(kwargs)
    aligned = ALIGNED_OPERANDS.get(target, ())
    for key in where:
        holder = args if isinstance(key, int) else kwargs
        v = (args[key] if key < len(args) else None) if isinstance(key, int) else kwargs.get(key)
        if isinstance(v, Pointwise) and (view := store_broadcast(g, v, key in aligned)) is not None:
            holder[key] = view
    return tuple(args), kwargs
