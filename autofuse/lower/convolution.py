"""Convolution: an extern (cuDNN / oneDNN) kernel in the layout that suits it, bias and layout
changes as pointwise work that fuses with its neighbours.

Note: two rewrites, both exact.
- The bias leaves the extern call and becomes a lazy `conv + bias[c]`, so it fuses into the
  epilogue kernel instead of costing a separate broadcast add over the whole output.
- Channels-last (`Heuristics.conv_layout`, recorded in the plan and chosen by the search): cuDNN
  computes convolutions on Hopper in NHWC; given NCHW tensors it transposes the input and weight
  in and the output out. The lowering can hand it channels-last operands instead — a copy that
  iterates in NHWC order (contiguous stores) and fuses into whatever produced the value — and
  the epilogue reads the NHWC result through its strides. A graph output keeps eager's strides
  (`GraphLowering` copies it there) in a 2-D tiled kernel. Which graphs take channels-last by
  default: lower/conv_layout.py.
"""
from __future__ import annotations

from typing import Any

import torch

from ..ir.values import Pointwise, ReinterpretView, is_tensor_value
from .common import upcast
from .registry import Unsupported, register

aten = torch.ops.aten


def channels_last_strides(size: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of the channels-last layout of an N, C, *spatial tensor (NHWC / NDHWC)."""
    n, c, *spatial = size
    strides = [0] * len(size)
    acc = c
    strides[1] = 1
    for d in range(len(size) - 1, 1, -1):
        strides[d] = acc
        acc *= size[d]
    strides[0] = acc
    return tuple(strides)


def _is_channels_last(value: Any) -> bool:
    layout = getattr(value, "layout", None)
    if layout is None or len(layout.size) < 3:
        return False
    want = channels_last_strides(tuple(layout.size))
    return all(s == w or sz == 1 for s, w, sz in zip(layout.stride, want, layout.size))


def _to_channels_last(g: Any, value: Any) -> Any:
    """The value realized in channels-last layout (a no-op when it already is)."""
    if _is_channels_last(value):
        return value
    done = g.layout_copies.get(id(value))
    if done is not None and done[0] is value:
        return done[1]
    # the copy iterates in the channels-last memory order (N, *spatial, C), so its stores are
    # contiguous, and the convolution reads it as an N, C, *spatial view (or in logical order as
    # 2-D tiles: Heuristics.channels_last_loops). No kernel consumes the copy, so one computed from
    # a buffer filled in memory order (a norm's output before its SiLU) iterates as that buffer
    # did, and shares its kernel.
    order = "memory" if g.reads_memory_order(value) else None
    buf = g.realize_channels_last(value if isinstance(value, Pointwise) else Pointwise(
        value.device, value.dtype, tuple(int(s) for s in value.size), value.loader()), order)
    g.layout_copies[id(value)] = (value, buf)  # one copy per value, however many convolutions read it
    return buf


def _fake_like(g: Any, value: Any) -> torch.Tensor:
    lay = value.layout
    if isinstance(value, ReinterpretView) and lay.offset:
        raise Unsupported("an offset view as a convolution operand")
    with g.fake_mode:
        return torch.empty_strided(tuple(lay.size), tuple(lay.stride), dtype=lay.dtype, device=lay.device)


@register(aten.convolution.default)
def _convolution(g, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if not (is_tensor_value(x) and is_tensor_value(weight)) or len(x.size) not in (3, 4, 5):
        raise Unsupported("convolution operands")
    if bias is not None and not is_tensor_value(bias):
        raise Unsupported("non-tensor bias")
    out = g.out
    channels_last = len(x.size) in (4, 5) and g.heuristics.conv_channels_last(x.device, x.dtype, g.conv_sites,
                                                                                 g.graph_nodes, g.training)
    if len(x.size) in (4, 5):
        g.conv_layout = "channels_last" if channels_last else "as_given"
    row_major_operand = len(x.size) == 3 and isinstance(x, Pointwise)
    if bias is None and not channels_last and not row_major_operand:
        raise Unsupported("nothing to rewrite: the plain extern call is the lowering")
    if channels_last:
        x, weight = _to_channels_last(g, x), _to_channels_last(g, weight)
    elif row_major_operand:
        # a 1-D convolution's operand computed here is stored row-major whatever eager's strides
        # (a GLU of a transposed activation): ATen's depthwise kernels copy any other layout first
        x, weight = g.realize(x, torch.empty(tuple(int(s) for s in x.size), device="meta")), g.realize(weight)
    else:
        x, weight = g.realize(x), g.realize(weight)
    args = (x, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    with g.fake_mode:
        fake = aten.convolution.default(_fake_like(g, x), _fake_like(g, weight), None, stride, padding,
                                        dilation, transposed, output_padding, groups)
    conv = g.fallback(aten.convolution.default, args, {}, fake)
    if bias is None:
        return conv
    dtype = upcast(out.dtype)
    load_conv, load_bias = conv.loader(), bias.loader()

    def inner(ops, idx):
        c = load_conv(ops, idx)
        b = load_bias(ops, [idx[1]])
        if upcast(conv.dtype) != dtype:
            c = ops.to_dtype(c, dtype)
        if upcast(bias.dtype) != dtype:
            b = ops.to_dtype(b, dtype)
        return ops.add(c, b)

    return Pointwise(out.device, out.dtype, tuple(int(s) for s in out.shape), inner, frozenset({"convolution"}))
