"""2-D pooling as lazy pointwise values: each output element the max or the mean of its window.

Note: lowered like Inductor's. The window's loads are inline, so the op before the pool is
computed inside the pooling kernel instead of being written out and read back. Max pooling writes
its int64 indices only where something reads them (a training step's backward); padding reads as
-inf and NaN propagates as in eager (an element that is NaN wins its window). The index is eager's:
the window's first in-bounds position, replaced by each larger value or NaN. Its backward gathers
instead of scattering: each input element sums the gradients of the few windows that can hold it
(ceil(k / s) per dim) whose index names it, as Inductor's lowering does; ATen's backward scatters
with atomics. Average pooling divides by eager's count: the window clipped to the padded input
(`count_include_pad`), or to the input itself, or `divisor_override`.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from ..ir.index import FloorDiv, ModIndex
from ..ir.values import Pointwise
from .common import origins_of, upcast
from .registry import Unsupported, register

aten = torch.ops.aten
POS = torch.int32  # a window position: bounded by the input's height or width


def _pair(v: Any, default: Sequence[int] | None = None) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    v = list(v) if v is not None else []
    if not v:
        if default is None:
            raise Unsupported("pooling parameter")
        return tuple(default)  # type: ignore[return-value]
    return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))


@dataclass(frozen=True)
class _Window:
    """A 2-D pooling window over x, and which input bounds it can cross: below 0 with padding, past
    the end with padding or ceil mode (only those get a mask)."""

    load: Any
    src: torch.dtype
    cd: torch.dtype
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    in_size: tuple[int, int]
    crosses: tuple[tuple[bool, bool], tuple[bool, bool]]

    @staticmethod
    def of(x: Any, out_size: Sequence[int], out_dtype: torch.dtype, kernel_size: Any, stride: Any, padding: Any,
           dilation: Any = 1) -> "_Window":
        k, p, d = _pair(kernel_size), _pair(padding), _pair(dilation)
        s = _pair(stride, k)
        n = (int(x.size[-2]), int(x.size[-1]))
        crosses = tuple((p[a] > 0, (int(out_size[a - 2]) - 1) * s[a] - p[a] + (k[a] - 1) * d[a] >= n[a])
                        for a in (0, 1))
        return _Window(x.loader(), x.dtype, upcast(out_dtype), k, s, p, d, n, crosses)  # type: ignore[arg-type]

    def starts(self, oh: Any, ow: Any) -> tuple[Any, Any]:
        """Where the window of output (oh, ow) starts in the unpadded input (negative in the padding)."""
        return oh * self.stride[0] - self.padding[0], ow * self.stride[1] - self.padding[1]

    def elements(self, ops: Any, idx: Sequence[Any], pad_value: float) -> Iterator[Any]:
        """The window's values in the compute dtype, `pad_value` where it lies outside the input."""
        *lead, oh, ow = idx
        hs, ws = self.starts(oh, ow)
        for i in range(self.kernel[0]):
            for j in range(self.kernel[1]):
                at = (hs + i * self.dilation[0], ws + j * self.dilation[1])
                conds = []
                for a in (0, 1):
                    lo, hi = self.crosses[a]
                    if lo or hi:
                        iv = ops.index_expr(at[a], POS)
                        if lo:
                            conds.append(ops.ge(iv, ops.constant(0, POS)))
                        if hi:
                            conds.append(ops.lt(iv, ops.constant(self.in_size[a], POS)))

                def value(at=at):
                    v = self.load(ops, [*lead, *at])
                    return v if upcast(self.src) == self.cd else ops.to_dtype(v, self.cd)
                if not conds:
                    yield value()
                    continue
                yield ops.masked(_all_of(ops, conds), value, pad_value)


@register(aten.max_pool2d_with_indices)
def _max_pool2d(g, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    for user in g.node.users:
        if user.target is not operator.getitem:
            raise Unsupported("max_pool2d outputs used whole")
    wants_indices = any(user.args[1] == 1 and user.users for user in g.node.users)
    values, indices = g.out
    if not values.dtype.is_floating_point or len(x.size) not in (3, 4):
        raise Unsupported("max_pool2d operands")
    if wants_indices and _pair(dilation) != (1, 1):
        raise Unsupported("max_pool2d indices with dilation")
    size = tuple(int(s) for s in values.shape)
    out_dtype = values.dtype
    win = _Window.of(x, size[-2:], out_dtype, kernel_size, stride, padding, dilation)
    origins = origins_of(x) | frozenset({"max_pool2d"})

    def fn(ops, idx):
        best = None
        for v in win.elements(ops, idx, float("-inf")):
            # eager's rule: a larger value or a NaN takes the window's place
            best = v if best is None else ops.where(_beats(ops, v, best), v, best)
        return best   # in upcast(out_dtype), as every lazy value: the store rounds

    def index_fn(ops, idx):
        hs, ws = win.starts(idx[-2], idx[-1])
        width = win.in_size[1]
        zero = ops.constant(0, POS)
        first = ops.add(ops.mul(ops.maximum(ops.index_expr(hs, POS), zero), ops.constant(width, POS)),
                        ops.maximum(ops.index_expr(ws, POS), zero))
        best, where = ops.constant(float("-inf"), win.cd), ops.to_dtype(first, torch.int64)
        offsets = itertools.product(range(win.kernel[0]), range(win.kernel[1]))   # `elements`' order
        for (i, j), v in zip(offsets, win.elements(ops, idx, float("-inf"))):
            take = _beats(ops, v, best)
            best = ops.where(take, v, best)
            where = ops.where(take, ops.index_expr((hs + i) * width + ws + j, torch.int64), where)
        return where

    pooled = Pointwise(values.device, out_dtype, size, fn, origins)
    if not wants_indices:
        return pooled, None
    return pooled, Pointwise(values.device, indices.dtype, size, index_fn, origins)


def _all_of(ops: Any, conds: Sequence[Any]) -> Any:
    """The conjunction of one or more boolean values."""
    cond = conds[0]
    for c in conds[1:]:
        cond = ops.logical_and(cond, c)
    return cond


def _beats(ops: Any, v: Any, best: Any) -> Any:
    """Eager's max-pooling rule: a larger value, or a NaN, takes the window's place."""
    return ops.logical_or(ops.gt(v, best), ops.isnan(v))


MAX_POOL_BACKWARD_WINDOWS = 25   # windows an input element can lie in, at most (Inductor's limit too)


@register(aten.max_pool2d_with_indices_backward)
def _max_pool2d_backward(g, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    out = g.out
    if not out.dtype.is_floating_point or len(x.size) not in (3, 4) or _pair(dilation) != (1, 1):
        raise Unsupported("max_pool2d_backward operands")
    k, p = _pair(kernel_size), _pair(padding)
    s = _pair(stride, k)
    reach = (-(-k[0] // s[0]), -(-k[1] // s[1]))   # windows per dim that can hold one input element
    if reach[0] * reach[1] > MAX_POOL_BACKWARD_WINDOWS:
        raise Unsupported("max_pool2d_backward: too many windows per element")
    size = tuple(int(d) for d in out.shape)
    out_size = (int(grad.size[-2]), int(grad.size[-1]))
    width = size[-1]
    grad_load, index_load = grad.loader(), indices.loader()
    cd = upcast(out.dtype)

    def fn(ops, idx):
        *lead, h, w = idx
        here = ops.index_expr(h * width + w, torch.int64)
        total = ops.constant(0.0, cd)
        for di in range(reach[0]):
            for dj in range(reach[1]):
                oh, ow = FloorDiv(h + p[0], s[0]) - di, FloorDiv(w + p[1], s[1]) - dj
                conds = []
                for o, n, off, kk, ss, dd in ((oh, out_size[0], h + p[0], k[0], s[0], di),
                                              (ow, out_size[1], w + p[1], k[1], s[1], dj)):
                    iv = ops.index_expr(o, POS)
                    conds += [ops.ge(iv, ops.constant(0, POS)), ops.lt(iv, ops.constant(n, POS))]
                    if dd * ss + ss > kk:   # the window ends before this element for some offsets
                        conds.append(ops.lt(ops.index_expr(ModIndex(off, ss) + dd * ss, POS), ops.constant(kk, POS)))

                def picked(oh=oh, ow=ow):
                    gv = grad_load(ops, [*lead, oh, ow])
                    gv = gv if grad.dtype == cd else ops.to_dtype(gv, cd)
                    return ops.where(ops.eq(index_load(ops, [*lead, oh, ow]), here), gv, ops.constant(0.0, cd))
                total = ops.add(total, ops.masked(_all_of(ops, conds), picked, 0.0))
        return total

    return Pointwise(out.device, out.dtype, size, fn, origins_of(grad) | frozenset({"max_pool2d_backward"}))


@register(aten.avg_pool2d)
def _avg_pool2d(g, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    out = g.out
    if not out.dtype.is_floating_point or len(x.size) not in (3, 4):
        raise Unsupported("avg_pool2d operands")
    size = tuple(int(s) for s in out.shape)
    out_dtype = out.dtype
    win = _Window.of(x, size[-2:], out_dtype, kernel_size, stride, padding)

    def clipped(ops, start, k, lo_bound, hi_bound):
        """The window [start, start + k) clipped to [lo_bound, hi_bound): its length, as an int32 value."""
        lo = ops.index_expr(start, POS)
        hi = ops.minimum(ops.index_expr(start + k, POS), ops.constant(hi_bound, POS))
        if lo_bound is not None:
            lo = ops.maximum(lo, ops.constant(lo_bound, POS))
        return ops.sub(hi, lo)

    def fn(ops, idx):
        total = None
        for v in win.elements(ops, idx, 0.0):
            total = v if total is None else ops.add(total, v)
        if divisor_override:
            div = ops.constant(float(divisor_override), win.cd)
        elif not any(lo or hi for lo, hi in win.crosses):   # every window is whole: a constant count
            div = ops.constant(float(win.kernel[0] * win.kernel[1]), win.cd)
        else:
            (kh, kw), (ph, pw), (in_h, in_w) = win.kernel, win.padding, win.in_size
            hs, ws = win.starts(idx[-2], idx[-1])
            if count_include_pad:
                n = ops.mul(clipped(ops, hs, kh, None, in_h + ph), clipped(ops, ws, kw, None, in_w + pw))
            else:
                n = ops.mul(clipped(ops, hs, kh, 0, in_h), clipped(ops, ws, kw, 0, in_w))
            div = ops.to_dtype(n, win.cd)
        return ops.truediv(total, div)

    return Pointwise(out.device, out_dtype, size, fn, origins_of(x) | frozenset({"avg_pool2d"}))
