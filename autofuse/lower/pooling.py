"""2-D pooling as lazy pointwise values: each output element the max or the mean of its window.

Note: lowered like Inductor's. The window's loads are inline, so the op before the pool is
computed inside the pooling kernel instead of being written out and read back. Max pooling is
lowered when nothing reads its indices (inference), so no int64 index tensor is written; padding
reads as -inf and NaN propagates as in eager (an element that is NaN wins its window). With the
indices used (a training step's backward reads them) it runs as ATen's kernel. Average pooling
divides by eager's count: the window clipped to the padded input (`count_include_pad`), or to the
input itself, or `divisor_override`.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import torch

from ..ir.values import Pointwise
from .common import origins_of, upcast
from .registry import Unsupported, register

aten = torch.ops.aten


def _pair(v: Any, default: Sequence[int] | None = None) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    v = list(v) if v is not None else []
    if not v:
        if default is None:
            raise Unsupported("pooling parameter")
        return tuple(default)  # type: ignore[return-value]
    return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))


@register(aten.max_pool2d_with_indices)
def _max_pool2d(g, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    for user in g.node.users:
        if user.target is not operator.getitem or (user.args[1] != 0 and user.users):
            raise Unsupported("max_pool2d indices are used")
    values, _ = g.out
    if not values.dtype.is_floating_point or len(x.size) not in (3, 4):
        raise Unsupported("max_pool2d operands")
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    in_h, in_w = int(x.size[-2]), int(x.size[-1])
    size = tuple(int(s) for s in values.shape)
    out_h, out_w = size[-2], size[-1]
    # which bounds a window can cross: below 0 with padding, past the end with padding or ceil_mode
    lo_h, hi_h = ph > 0, (out_h - 1) * sh - ph + (kh - 1) * dh >= in_h
    lo_w, hi_w = pw > 0, (out_w - 1) * sw - pw + (kw - 1) * dw >= in_w
    load = x.loader()
    src, out_dtype = x.dtype, values.dtype
    cd = upcast(out_dtype)

    def inside(ops, i, lo, hi, n):
        conds = []
        if lo or hi:
            iv = ops.index_expr(i, torch.int64)
            if lo:
                conds.append(ops.ge(iv, ops.constant(0, torch.int64)))
            if hi:
                conds.append(ops.lt(iv, ops.constant(n, torch.int64)))
        return conds

    def fn(ops, idx):
        *lead, oh, ow = idx
        best = None
        for i in range(kh):
            ih = oh * sh - ph + i * dh
            for j in range(kw):
                iw = ow * sw - pw + j * dw
                conds = inside(ops, ih, lo_h, hi_h, in_h) + inside(ops, iw, lo_w, hi_w, in_w)

                def value(ih=ih, iw=iw):
                    v = load(ops, [*lead, ih, iw])
                    return v if upcast(src) == cd else ops.to_dtype(v, cd)
                if conds:
                    cond = conds[0]
                    for c in conds[1:]:
                        cond = ops.logical_and(cond, c)
                    v = ops.masked(cond, value, float("-inf"))
                else:
                    v = value()
                # eager's rule: a larger value or a NaN takes the window's place
                best = v if best is None else ops.where(ops.logical_or(ops.gt(v, best), ops.isnan(v)), v, best)
        return best if cd == out_dtype else ops.to_dtype(best, out_dtype)

    pooled = Pointwise(values.device, out_dtype, size, fn, origins_of(x) | frozenset({"max_pool2d"}))
    return pooled, None


@register(aten.avg_pool2d)
def _avg_pool2d(g, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    out = g.out
    if not out.dtype.is_floating_point or len(x.size) not in (3, 4):
        raise Unsupported("avg_pool2d operands")
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    in_h, in_w = int(x.size[-2]), int(x.size[-1])
    size = tuple(int(s) for s in out.shape)
    out_h, out_w = size[-2], size[-1]
    lo_h, hi_h = ph > 0, (out_h - 1) * sh - ph + kh - 1 >= in_h
    lo_w, hi_w = pw > 0, (out_w - 1) * sw - pw + kw - 1 >= in_w
    load = x.loader()
    src, out_dtype = x.dtype, out.dtype
    cd = upcast(out_dtype)
    i64 = torch.int64

    def clipped(ops, start, k, lo_bound, hi_bound):
        """The window [start, start + k) clipped to [lo_bound, hi_bound): its length, as an int64 value."""
        lo = ops.index_expr(start, i64)
        hi = ops.minimum(ops.index_expr(start + k, i64), ops.constant(hi_bound, i64))
        if lo_bound is not None:
            lo = ops.maximum(lo, ops.constant(lo_bound, i64))
        return ops.sub(hi, lo)

    def fn(ops, idx):
        *lead, oh, ow = idx
        total = None
        for i in range(kh):
            ih = oh * sh - ph + i
            for j in range(kw):
                iw = ow * sw - pw + j
                conds = []
                for v, lo, hi, n in ((ih, lo_h, hi_h, in_h), (iw, lo_w, hi_w, in_w)):
                    if lo or hi:
                        iv = ops.index_expr(v, i64)
                        if lo:
                            conds.append(ops.ge(iv, ops.constant(0, i64)))
                        if hi:
                            conds.append(ops.lt(iv, ops.constant(n, i64)))

                def value(ih=ih, iw=iw):
                    v = load(ops, [*lead, ih, iw])
                    return v if upcast(src) == cd else ops.to_dtype(v, cd)
                if conds:
                    cond = conds[0]
                    for c in conds[1:]:
                        cond = ops.logical_and(cond, c)
                    v = ops.masked(cond, value, 0.0)
                else:
                    v = value()
                total = v if total is None else ops.add(total, v)
        if divisor_override:
            div = ops.constant(float(divisor_override), cd)
        else:
            hs, ws = oh * sh - ph, ow * sw - pw
            if count_include_pad:
                n = ops.mul(clipped(ops, hs, kh, None, in_h + ph), clipped(ops, ws, kw, None, in_w + pw))
            else:
                n = ops.mul(clipped(ops, hs, kh, 0, in_h), clipped(ops, ws, kw, 0, in_w))
            div = ops.to_dtype(n, cd)
        avg = ops.truediv(total, div)
        return avg if cd == out_dtype else ops.to_dtype(avg, out_dtype)

    return Pointwise(out.device, out_dtype, size, fn, origins_of(x) | frozenset({"avg_pool2d"}))
