"""Tensor factories: full / zeros / ones (and *_like), scalar_tensor, arange, iota."""
from __future__ import annotations

import torch

from ..ir.values import Pointwise
from .common import scalar_value, upcast
from .registry import Unsupported, register

aten = torch.ops.aten
prims = torch.ops.prims


def _const(g, value):
    out = g.out
    cd = upcast(out.dtype)
    if isinstance(value, complex):
        raise Unsupported("complex")
    size = tuple(int(s) for s in out.shape)
    v = scalar_value(value, out.dtype)  # full((3,), -1, dtype=uint8) is 255, full(..., 2.7, dtype=int32) is 2
    return Pointwise(out.device, out.dtype, size, lambda ops, idx: ops.constant(v, cd))


@register(aten.full)
def _full(g, size, value, **kw):
    return _const(g, value)


@register(aten.full_like)
def _full_like(g, x, value, **kw):
    return _const(g, value)


# allocations whose content is unspecified
UNINITIALIZED = (aten.empty_like.default, aten.new_empty.default, aten.empty.memory_format, aten.empty_strided.default,
                 aten.empty_permuted.default, aten.new_empty_strided.default)


@register(aten.zeros, aten.zeros_like, aten.new_zeros, aten.empty_like, aten.new_empty, aten.empty.memory_format,
          aten.empty_strided, aten.empty_permuted, aten.new_empty_strided)
def _zeros(g, *args, **kw):
    """Zeros; uninitialized memory (`empty*`) as zeros too: a value any content of which is right,
    instead of an allocation call on every run and a kernel copying its garbage. A store scatter
    into it (an inverse permutation scattered into `empty_like(perm)`) allocates its output
    without filling it (`scatter.stores_into`)."""
    return _const(g, 0)


@register(aten.ones, aten.ones_like, aten.new_ones)
def _ones(g, *args, **kw):
    return _const(g, 1)


@register(aten.new_full)
def _new_full(g, x, size, value, **kw):
    return _const(g, value)


@register(aten.fill)
def _fill(g, x, value):
    if not isinstance(value, (int, float, bool)):
        raise Unsupported("tensor fill value")
    return _const(g, value)


@register(aten.scalar_tensor)
def _scalar_tensor(g, value, **kw):
    return _const(g, value)


@register(aten.arange)
def _arange(g, *args, **kw):
    nums = [a for a in args if isinstance(a, (int, float))]
    if len(nums) == 1:
        start, step = 0, 1
    elif len(nums) == 2:
        start, step = nums[0], 1
    elif len(nums) == 3:
        start, step = nums[0], nums[2]
    else:
        raise Unsupported("arange signature")
    out = g.out
    cd = upcast(out.dtype)
    n = int(out.shape[0]) if out.shape else 0
    exact = 1 << (24 if cd == torch.float32 else 53)
    integral = all(float(v).is_integer() for v in (start, step))
    if cd.is_floating_point and integral and max(abs(start), abs(start + step * max(n - 1, 0))) <= exact:
        # integer values the float type holds exactly: counted in int32 and converted once (the
        # float64 arithmetic below is slow on GPUs, and a resize's positions come from these)
        def fn(ops, idx):
            return ops.to_dtype(ops.index_expr(int(start) + int(step) * idx[0], torch.int32), cd)
    elif cd.is_floating_point:
        def fn(ops, idx):
            i = ops.to_dtype(ops.index_expr(idx[0], torch.int64), torch.float64)
            v = ops.add(ops.constant(float(start), torch.float64), ops.mul(i, ops.constant(float(step), torch.float64)))
            return ops.to_dtype(v, cd)
    else:
        def fn(ops, idx):
            return ops.to_dtype(ops.index_expr(int(start) + int(step) * idx[0], torch.int64), cd)
    return Pointwise(out.device, out.dtype, tuple(int(s) for s in out.shape), fn)


@register(prims.iota)
def _iota(g, length, *, start, step, **kw):
    out = g.out
    cd = upcast(out.dtype)
    return Pointwise(out.device, out.dtype, (int(length),),
                     lambda ops, idx: ops.to_dtype(ops.index_expr(start + step * idx[0], torch.int64), cd))
