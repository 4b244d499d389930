"""2-D and 3-D pooling, fixed and adaptive, as lazy pointwise values: each output element the max or
the mean of its window.

Note: lowered like Inductor's. The window's loads are inline, so the op before the pool is
computed inside the pooling kernel instead of being written out and read back. Max pooling writes
its int64 indices only where something reads them (a training step's backward); padding reads as
-inf and NaN propagates as in eager (an element that is NaN wins its window). The index is eager's:
the window's first in-bounds position, replaced by each larger value or NaN. Its backward gathers
instead of scattering: each input element sums the gradients of the few windows that can hold it
(ceil(k / s) per dim) whose index names it, as Inductor's lowering does; ATen's backward scatters
with atomics. Average pooling divides by eager's count: the window clipped to the padded input
(`count_include_pad`), or to the input itself, or `divisor_override`. Adaptive pooling's window
for output o of n over an input of length L is [o*L // n, ceil((o+1)*L / n)), as eager's: where
the lengths differ between windows the kernel visits the longest and masks the rest (Inductor's
lowering too), up to ADAPTIVE_WINDOW_MAX elements; longer windows keep ATen's kernel.
"""
from __future__ import annotations

import itertools
import math
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


def _dims(v: Any, nd: int, default: Sequence[int] | None = None) -> tuple[int, ...]:
    """A pooling parameter as one int per spatial dim (an int or a one-element list repeats)."""
    if isinstance(v, int):
        return (v,) * nd
    v = list(v) if v is not None else []
    if not v:
        if default is None:
            raise Unsupported("pooling parameter")
        return tuple(default)
    if len(v) not in (1, nd):
        raise Unsupported("pooling parameter")
    return tuple(int(v[0]) for _ in range(nd)) if len(v) == 1 else tuple(int(a) for a in v)


@dataclass(frozen=True)
class _Window:
    """A pooling window over x's last nd dims, and which input bounds it can cross per dim: below 0
    with padding, past the end with padding or ceil mode (only those get a mask)."""

    load: Any
    src: torch.dtype
    cd: torch.dtype
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    in_size: tuple[int, ...]
    crosses: tuple[tuple[bool, bool], ...]
    out_size: tuple[int, ...]

    @staticmethod
    def of(x: Any, out_size: Sequence[int], out_dtype: torch.dtype, kernel_size: Any, stride: Any, padding: Any,
           dilation: Any = 1) -> "_Window":
        nd = len(out_size)
        k, p, d = _dims(kernel_size, nd), _dims(padding, nd), _dims(dilation, nd)
        s = _dims(stride, nd, k)
        n = tuple(int(e) for e in x.size[-nd:])
        crosses = tuple((p[a] > 0, (int(out_size[a]) - 1) * s[a] - p[a] + (k[a] - 1) * d[a] >= n[a])
                        for a in range(nd))
        return _Window(x.loader(), x.dtype, upcast(out_dtype), k, s, p, d, n, crosses,
                       tuple(int(e) for e in out_size))

    @property
    def nd(self) -> int:
        return len(self.kernel)

    def starts(self, outs: Sequence[Any]) -> tuple[Any, ...]:
        """Where the window of output position `outs` starts in the unpadded input (negative in the padding)."""
        return tuple(o * self.stride[a] - self.padding[a] for a, o in enumerate(outs))

    def offsets(self) -> Iterator[tuple[int, ...]]:
        """The window's positions relative to its start, in eager's order (the last dim fastest)."""
        return itertools.product(*(range(k) for k in self.kernel))

    def reachable(self) -> Iterator[tuple[int, ...]]:
        """`offsets` without those that lie outside the input for every output position (padding
        alone): EfficientNet's head pools its 19x19 map with a 2560x2560 window in ceil mode."""
        def live(a: int) -> list[int]:
            last = (self.out_size[a] - 1) * self.stride[a] - self.padding[a]
            return [o for o in range(self.kernel[a])
                    if o * self.dilation[a] - self.padding[a] < self.in_size[a] and last + o * self.dilation[a] >= 0]
        return itertools.product(*(live(a) for a in range(self.nd)))

    def elements(self, ops: Any, idx: Sequence[Any], pad_value: float) -> Iterator[tuple[tuple[Any, ...], Any]]:
        """(position, value) over the window in `offsets`' order, the value in the compute dtype,
        `pad_value` where the window lies outside the input (positions outside it for every output
        left out: they would add the pad value alone)."""
        lead, starts = list(idx[:-self.nd]), self.starts(idx[-self.nd:])
        for off in self.reachable():
            at = tuple(st + o * dd for st, o, dd in zip(starts, off, self.dilation))
            conds = []
            for a in range(self.nd):
                lo, hi = self.crosses[a]
                if lo or hi:
                    iv = ops.index_expr(at[a], POS)
                    if lo:
                        conds.append(ops.ge(iv, ops.constant(0, POS)))
                    if hi:
                        conds.append(ops.lt(iv, ops.constant(self.in_size[a], POS)))
            yield at, _load_at(ops, self.load, lead, at, conds, self.src, self.cd, pad_value)


def _load_at(ops: Any, load: Any, lead: Sequence[Any], at: Sequence[Any], conds: Sequence[Any], src: torch.dtype,
             cd: torch.dtype, pad_value: float) -> Any:
    """The input at (*lead, *at) in the compute dtype; `pad_value` where one of `conds` fails."""
    def value():
        v = load(ops, [*lead, *at])
        return v if upcast(src) == cd else ops.to_dtype(v, cd)
    return ops.masked(_all_of(ops, conds), value, pad_value) if conds else value()


def _window_max(ops: Any, elements: Iterator[tuple[Any, Any]]) -> Any:
    """The window's max by eager's rule (a larger value or a NaN takes the window's place)."""
    best = None
    for _, v in elements:
        best = v if best is None else ops.where(_beats(ops, v, best), v, best)
    return best   # in the compute dtype, as every lazy value: the store rounds


def _window_argmax(ops: Any, first: Any, elements: Iterator[tuple[Any, Any]], in_size: Sequence[int],
                   cd: torch.dtype) -> Any:
    """Eager's max-pooling index (int64, flat over the pooled dims): `first` (the window's first
    position in the input), replaced by the position of each larger value or NaN."""
    best, where = ops.constant(float("-inf"), cd), first
    for at, v in elements:
        take = _beats(ops, v, best)
        best = ops.where(take, v, best)
        where = ops.where(take, ops.index_expr(_flat(at, in_size), torch.int64), where)
    return where


def _indices_wanted(g: Any) -> bool:
    """Does the graph read a max pool's indices (a training step's backward)? Its two outputs must be
    taken apart (getitem) for the values to be lowered without them."""
    for user in g.node.users:
        if user.target is not operator.getitem:
            raise Unsupported("max pooling outputs used whole")
    return any(user.args[1] == 1 and user.users for user in g.node.users)


def _flat(position: Sequence[Any], size: Sequence[int]) -> Any:
    """The row-major offset of a position within the last dims of `size` (eager's pooling index)."""
    out = 0
    for p, n in zip(position, size):
        out = out * n + p
    return out


@register(aten.max_pool2d_with_indices, aten.max_pool3d_with_indices)
def _max_pool(g, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    nd = 3 if g.node.target.overloadpacket is aten.max_pool3d_with_indices else 2
    wants_indices = _indices_wanted(g)
    values, indices = g.out
    if not values.dtype.is_floating_point or len(x.size) not in (nd + 1, nd + 2):
        raise Unsupported("max pooling operands")
    if wants_indices and _dims(dilation, nd) != (1,) * nd:
        raise Unsupported("max pooling indices with dilation")
    size = tuple(int(s) for s in values.shape)
    out_dtype = values.dtype
    win = _Window.of(x, size[-nd:], out_dtype, kernel_size, stride, padding, dilation)
    origins = origins_of(x) | frozenset({f"max_pool{nd}d"})

    def fn(ops, idx):
        return _window_max(ops, win.elements(ops, idx, float("-inf")))

    def index_fn(ops, idx):
        zero = ops.constant(0, POS)
        first = None   # the window's first in-bounds position
        for st, n in zip(win.starts(idx[-nd:]), win.in_size):
            at = ops.maximum(ops.index_expr(st, POS), zero)
            first = at if first is None else ops.add(ops.mul(first, ops.constant(n, POS)), at)
        return _window_argmax(ops, ops.to_dtype(first, torch.int64), win.elements(ops, idx, float("-inf")),
                              win.in_size, win.cd)

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


@register(aten.max_pool2d_with_indices_backward, aten.max_pool3d_with_indices_backward)
def _max_pool_backward(g, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    nd = 3 if g.node.target.overloadpacket is aten.max_pool3d_with_indices_backward else 2
    out = g.out
    if not out.dtype.is_floating_point or len(x.size) not in (nd + 1, nd + 2) or _dims(dilation, nd) != (1,) * nd:
        raise Unsupported("max pooling backward operands")
    k, p = _dims(kernel_size, nd), _dims(padding, nd)
    s = _dims(stride, nd, k)
    reach = tuple(-(-kk // ss) for kk, ss in zip(k, s))   # windows per dim that can hold one input element
    if math.prod(reach) > MAX_POOL_BACKWARD_WINDOWS:
        raise Unsupported("max pooling backward: too many windows per element")
    size = tuple(int(d) for d in out.shape)
    out_size = tuple(int(e) for e in grad.size[-nd:])
    grad_load, index_load = grad.loader(), indices.loader()
    cd = upcast(out.dtype)

    def fn(ops, idx):
        lead, pos = list(idx[:-nd]), idx[-nd:]
        here = ops.index_expr(_flat(pos, size[-nd:]), torch.int64)
        total = ops.constant(0.0, cd)
        for back in itertools.product(*(range(r) for r in reach)):
            outs = [FloorDiv(e + p[a], s[a]) - back[a] for a, e in enumerate(pos)]
            conds = []
            for a in range(nd):
                iv = ops.index_expr(outs[a], POS)
                conds += [ops.ge(iv, ops.constant(0, POS)), ops.lt(iv, ops.constant(out_size[a], POS))]
                if back[a] * s[a] + s[a] > k[a]:   # the window ends before this element for some offsets
                    off = ModIndex(pos[a] + p[a], s[a]) + back[a] * s[a]
                    conds.append(ops.lt(ops.index_expr(off, POS), ops.constant(k[a], POS)))

            def picked(outs=outs):
                gv = grad_load(ops, [*lead, *outs])
                gv = gv if grad.dtype == cd else ops.to_dtype(gv, cd)
                return ops.where(ops.eq(index_load(ops, [*lead, *outs]), here), gv, ops.constant(0.0, cd))
            total = ops.add(total, ops.masked(_all_of(ops, conds), picked, 0.0))
        return total

    return Pointwise(out.device, out.dtype, size, fn, origins_of(grad) | frozenset({f"max_pool{nd}d_backward"}))


@register(aten.avg_pool2d, aten.avg_pool3d)
def _avg_pool(g, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    nd = 3 if g.node.target.overloadpacket is aten.avg_pool3d else 2
    out = g.out
    if not out.dtype.is_floating_point or len(x.size) not in (nd + 1, nd + 2):
        raise Unsupported("average pooling operands")
    size = tuple(int(s) for s in out.shape)
    out_dtype = out.dtype
    win = _Window.of(x, size[-nd:], out_dtype, kernel_size, stride, padding)

    def clipped(ops, start, k, lo_bound, hi_bound):
        """The window [start, start + k) clipped to [lo_bound, hi_bound): its length, as an int32 value."""
        lo = ops.index_expr(start, POS)
        hi = ops.minimum(ops.index_expr(start + k, POS), ops.constant(hi_bound, POS))
        if lo_bound is not None:
            lo = ops.maximum(lo, ops.constant(lo_bound, POS))
        return ops.sub(hi, lo)

    def fn(ops, idx):
        total = None
        for _, v in win.elements(ops, idx, 0.0):
            total = v if total is None else ops.add(total, v)
        if divisor_override:
            div = ops.constant(float(divisor_override), win.cd)
        elif not any(lo or hi for lo, hi in win.crosses):   # every window is whole: a constant count
            div = ops.constant(float(math.prod(win.kernel)), win.cd)
        else:
            n = None
            for st, kk, pp, e in zip(win.starts(idx[-nd:]), win.kernel, win.padding, win.in_size):
                length = clipped(ops, st, kk, None, e + pp) if count_include_pad else clipped(ops, st, kk, 0, e)
                n = length if n is None else ops.mul(n, length)
            div = ops.to_dtype(n, win.cd)
        return ops.truediv(total, div)

    return Pointwise(out.device, out_dtype, size, fn, origins_of(x) | frozenset({f"avg_pool{nd}d"}))


ADAPTIVE_WINDOW_MAX = 25   # elements an adaptive window may visit (Inductor's limit too)


@dataclass(frozen=True)
class _AdaptiveDim:
    """One dim of an adaptive pool: output o covers [o*L // n, ceil((o+1)*L / n)) of the input."""

    length: int   # L, the input's
    out: int      # n, the output's

    def start(self, o: Any) -> Any:
        return FloorDiv(o * self.length, self.out)

    def end(self, o: Any) -> Any:
        return FloorDiv((o + 1) * self.length + self.out - 1, self.out)

    @property
    def lengths(self) -> set[int]:
        L, n = self.length, self.out
        return {-(-(o + 1) * L // n) - o * L // n for o in range(n)}

    @property
    def longest(self) -> int:
        return max(self.lengths)

    @property
    def varies(self) -> bool:
        return len(self.lengths) > 1


def _adaptive(x: Any, out_size: Sequence[int]) -> tuple[list[_AdaptiveDim], Any]:
    nd = len(out_size)
    if len(x.size) not in (nd + 1, nd + 2):
        raise Unsupported("adaptive pooling operands")
    dims = [_AdaptiveDim(int(L), int(n)) for L, n in zip(x.size[-nd:], out_size)]
    if any(d.out == 0 or d.length == 0 for d in dims) or math.prod(d.longest for d in dims) > ADAPTIVE_WINDOW_MAX:
        raise Unsupported("adaptive pooling: windows longer than ADAPTIVE_WINDOW_MAX elements")
    return dims, x.loader()


def _adaptive_elements(ops: Any, idx: Sequence[Any], dims: Sequence[_AdaptiveDim], load: Any, src: torch.dtype,
                       cd: torch.dtype, pad_value: float) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(position, value) over the longest window, in eager's order; `pad_value` past a shorter
    window's end."""
    nd = len(dims)
    lead, outs = list(idx[:-nd]), idx[-nd:]
    starts = [d.start(o) for d, o in zip(dims, outs)]
    for off in itertools.product(*(range(d.longest) for d in dims)):
        at = tuple(st + k for st, k in zip(starts, off))
        conds = [ops.lt(ops.index_expr(a, POS), ops.index_expr(d.end(o), POS))
                 for a, d, o, k in zip(at, dims, outs, off) if d.varies and k >= min(d.lengths)]
        yield at, _load_at(ops, load, lead, at, conds, src, cd, pad_value)


@register(aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d)
def _adaptive_avg_pool(g, x, output_size):
    out = g.out
    if not out.dtype.is_floating_point:
        raise Unsupported("adaptive average pooling operands")
    size = tuple(int(s) for s in out.shape)
    nd = 3 if g.node.target.overloadpacket is aten._adaptive_avg_pool3d else 2
    dims, load = _adaptive(x, size[-nd:])
    cd = upcast(out.dtype)

    def fn(ops, idx):
        total = None
        for _, v in _adaptive_elements(ops, idx, dims, load, x.dtype, cd, 0.0):
            total = v if total is None else ops.add(total, v)
        n = None
        for d, o in zip(dims, idx[-nd:]):
            length = ops.index_expr(d.end(o) - d.start(o), POS) if d.varies else ops.constant(d.longest, POS)
            n = length if n is None else ops.mul(n, length)
        return ops.truediv(total, ops.to_dtype(n, cd))

    return Pointwise(out.device, out.dtype, size, fn, origins_of(x) | frozenset({f"adaptive_avg_pool{nd}d"}))


@register(aten.adaptive_max_pool2d, aten.adaptive_max_pool3d)
def _adaptive_max_pool(g, x, output_size):
    values, indices = g.out
    if not values.dtype.is_floating_point:
        raise Unsupported("adaptive max pooling operands")
    wants_indices = _indices_wanted(g)
    size = tuple(int(s) for s in values.shape)
    nd = 3 if g.node.target.overloadpacket is aten.adaptive_max_pool3d else 2
    dims, load = _adaptive(x, size[-nd:])
    cd = upcast(values.dtype)
    in_size = [d.length for d in dims]
    origins = origins_of(x) | frozenset({f"adaptive_max_pool{nd}d"})

    def fn(ops, idx):
        return _window_max(ops, _adaptive_elements(ops, idx, dims, load, x.dtype, cd, float("-inf")))

    def index_fn(ops, idx):
        first = _flat([d.start(o) for d, o in zip(dims, idx[-nd:])], in_size)
        return _window_argmax(ops, ops.index_expr(first, torch.int64),
                              _adaptive_elements(ops, idx, dims, load, x.dtype, cd, float("-inf")), in_size, cd)

    pooled = Pointwise(values.device, values.dtype, size, fn, origins)
    return pooled, (Pointwise(values.device, indices.dtype, size, index_fn, origins) if wants_indices else None)
