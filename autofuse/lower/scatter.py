"""Scatters: accumulating ones as atomic adds (index_put with accumulate, which an embedding's
gradient decomposes to, index_add, scatter_add, scatter_reduce's sum and mean) or atomic maxima
and minima (scatter_reduce's amax and amin), the others as stores
(index_put without accumulate, index_copy: a static KV cache written at its new positions;
scatter from a source or of a value).

Note: the result is a copy of the updated tensor (zeros, for a gradient) in a buffer of its own,
then one kernel that adds each value at the position its indices give (`ScatterBody`): atomic
adds, so repeated indices need no sort, and that kernel can be the epilogue of the one computing
the values (an embedding's gradient added as the layer norm's backward produces each row, as
Inductor does). ATen's accumulating index_put sorts the indices and adds each run of equal ones in
a kernel of its own. The order of the adds varies between runs, as CUDA's index_add and
scatter_add vary; deterministic mode keeps ATen's op, and so do dtypes without a native atomic add.
A scatter without accumulate stores each value at its position in the same way (any dtype); where
indices repeat, which value lands is unspecified, as it is in eager on the GPU; deterministic mode
keeps ATen's op (it sorts the indices so the last one wins).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..ir.index import is_dense
from ..ir.values import (ComputedBuffer, InputBuffer, Layout, Pointwise, PointwiseBody, ReinterpretView, ScatterBody,
                         is_tensor_value)
from .common import broadcast_loader, norm_dim, origins_of, scalar_value, upcast
from .creation import UNINITIALIZED
from .indexing import advanced_position, scatter_one_per_row
from .registry import Unsupported, register
from .sorted_keys import inverse_permutation

aten = torch.ops.aten

# dtypes Triton adds atomically on the GPU and in its interpreter (bf16 has no interpreter add, and
# half-precision sums of many terms would round each add)
ATOMIC_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def scatter_into(g: Any, x: Any, size: Sequence[int], position: Callable[..., Sequence[Any]],
                 values: Callable[[torch.dtype], Callable[..., Any]], *operands: Any,
                 reduce: str | None = "sum") -> ComputedBuffer:
    """x's values with values(dtype)(idx) combined (`reduce`: "sum", "amax", "amin" by atomics) or
    stored (None) at position(idx) for every idx of `size`; `values` makes the loader of the values
    in the kernel's dtype, `operands` are the tensors read. x is a tensor value or a Python scalar
    (a filled result), or None where no element keeps a value from before: position is a
    permutation of the output's elements (each stored exactly once, deterministic), or the
    tensor stored into is uninitialized memory (`stores_into`)."""
    out = g.out
    if x is None and reduce is not None:
        raise ValueError("a scatter without a target stores a permutation; it cannot combine")
    if x is not None and torch.are_deterministic_algorithms_enabled():
        raise Unsupported("deterministic algorithms: ATen's sorted scatter")
    if reduce is not None and out.dtype not in ATOMIC_DTYPES:
        raise Unsupported(f"no atomic {reduce} of {out.dtype}")
    shape = tuple(int(s) for s in out.shape)
    stride = tuple(int(s) for s in out.stride())
    layout = Layout(out.device, out.dtype, shape, stride) if is_dense(shape, stride) \
        else Layout.contiguous(out.device, out.dtype, shape)
    dtype = upcast(out.dtype)
    origins = origins_of(*([x] if is_tensor_value(x) else []), *operands) | g.current_origins()
    target = None if x is None else g.add_computed(
        ComputedBuffer(g.new_name(), layout, PointwiseBody(shape, broadcast_loader(x, shape, dtype)), origins)).name
    body = ScatterBody(tuple(int(s) for s in size), values(dtype), position, target, reduce)
    return g.add_computed(ComputedBuffer(g.new_name(), layout, body, origins))


def stores_into(g: Any, x: Any) -> Any:
    """x, the tensor a store scatter writes into, or None (scatter_into's output allocated, not
    filled first) where x is uninitialized memory, whose elements that no store reaches may hold
    anything; Unsupported for a graph input whose update is copied back into it, or a view: a
    static cache updated in place, where ATen's in-place op writes only the new positions and a
    generated scatter would copy the whole cache first."""
    base = g.node.args[0]
    written_back = any(u.target is aten.copy_.default and u.args[0] is base for u in g.node.users)
    if isinstance(x, ReinterpretView) or (isinstance(x, InputBuffer) and written_back):
        raise Unsupported("a store scatter updating a graph input in place, or into a view: ATen's in-place op")
    uninitialized = isinstance(base, torch.fx.Node) and base.target in UNINITIALIZED
    return None if uninitialized and not torch.are_deterministic_algorithms_enabled() else x


def _masked_put(g: Any, x: Any, indices: Sequence[Any], values: Any, accumulate: bool) -> Pointwise | None:
    """`x[mask] = v` (or `+= v`) with one bool mask over consecutive dims of x and a v that does not
    vary along the selected elements (a scalar, or a row broadcast to every selected row): a
    where (an add) over x that fuses with what surrounds it, as Inductor's masked_fill rewrite;
    None for any other index_put. Without the rewrite the mask's count of True makes the values'
    shape data-dependent, and the op stays ATen's."""
    tensors = [(p, t) for p, t in enumerate(indices) if t is not None]
    if len(tensors) != 1 or tensors[0][1].dtype not in (torch.bool, torch.uint8) or not is_tensor_value(values):
        return None
    p, mask = tensors[0]
    m = len(mask.size)
    if tuple(mask.size) != tuple(x.size[p:p + m]):
        return None
    selected = tuple(x.size[:p]) + (1,) + tuple(x.size[p + m:])   # the selected elements' dim, as 1
    vs = tuple(values.size)
    if len(vs) > len(selected) or any(v not in (1, s) for v, s in zip(vs[::-1], selected[::-1])):
        return None
    out_dtype = g.out.dtype
    dtype = upcast(out_dtype)
    xl, ml = broadcast_loader(x, x.size, dtype), mask.loader()
    vl = broadcast_loader(values, selected, dtype)

    def fn(ops, idx):
        hit = ml(ops, list(idx[p:p + m]))
        if mask.dtype != torch.bool:
            hit = ops.ne(hit, ops.constant(0, mask.dtype))
        v = vl(ops, list(idx[:p]) + [0] + list(idx[p + m:]))
        old = xl(ops, idx)
        new = ops.add(old, v) if accumulate else v
        out = ops.where(hit, new, old)
        return out if dtype == out_dtype else ops.to_dtype(out, out_dtype)
    return Pointwise(x.device, out_dtype, tuple(x.size), fn, origins_of(x, mask, values))


@register(aten.index_put)
def _index_put(g, x, indices, values, accumulate=False):
    masked = _masked_put(g, x, indices, values, accumulate)
    if masked is not None:
        return masked
    rank = None if accumulate else inverse_permutation(g, x, indices, values)
    if rank is not None:   # a counting sort's permutation inverted: the ranks it computed
        out_dtype = g.out.dtype
        return Pointwise(x.device, out_dtype, tuple(x.size), lambda ops, idx: ops.to_dtype(rank(ops, idx), out_dtype),
                         origins_of(*[t for t in indices if t is not None]) | g.current_origins())
    size, position = advanced_position(x.size, indices)
    return scatter_into(g, x if accumulate else stores_into(g, x), size, position,
                        lambda dtype: broadcast_loader(values, size, dtype),
                        values, *[t for t in indices if t is not None], reduce="sum" if accumulate else None)


def _position_along(x: Any, d: int, index: Any, per_slice: bool) -> Callable[..., list[Any]]:
    """The position in x of an iteration point idx: idx with its dim d read from `index`, at idx[d]
    for a 1-D index of whole slices (index_add, index_copy), else at idx (scatter_add)."""
    il, n = index.loader(), x.size[d]

    def position(ops, idx):
        sub = list(idx)
        sub[d] = ops.indirect(il(ops, [idx[d]] if per_slice else idx), n)
        return sub
    return position


@register(aten.index_copy)
def _index_copy(g, x, dim, index, source):
    """x with source's slices along dim written at the positions `index` gives them."""
    if not len(x.size) or len(index.size) != 1 or len(source.size) != len(x.size):
        raise Unsupported("index_copy of a scalar or with a multi-dim index")
    d = norm_dim(dim, len(x.size))
    return scatter_into(g, stores_into(g, x), source.size, _position_along(x, d, index, True),
                        lambda dtype: broadcast_loader(source, source.size, dtype), source, index, reduce=None)


@register(aten.index_add)
def _index_add(g, x, dim, index, source, *, alpha=1):
    """x with alpha * source's slices along dim added at the positions `index` gives them."""
    if not len(x.size) or len(index.size) != 1 or len(source.size) != len(x.size):
        raise Unsupported("index_add of a scalar or with a multi-dim index")
    d = norm_dim(dim, len(x.size))
    position = _position_along(x, d, index, True)

    def values(dtype: torch.dtype) -> Callable[..., Any]:
        sl = broadcast_loader(source, source.size, dtype)
        if alpha == 1:
            return sl
        return lambda ops, idx: ops.mul(sl(ops, idx), ops.constant(scalar_value(alpha, dtype), dtype))
    return scatter_into(g, x, source.size, position, values, source, index)


@register(aten.scatter)
def _scatter(g, x, dim, index, value, reduce=None):
    """x with src's elements (or one value) written at the positions along dim that index gives:
    with one index per row, a select that fuses with its readers (nll_loss's backward); else a
    store scatter."""
    try:
        return scatter_one_per_row(g, x, dim, index, value, reduce)
    except Unsupported:
        if reduce is not None:
            raise
    d = norm_dim(dim, len(x.size))
    if not len(x.size) or len(index.size) != len(x.size):
        raise Unsupported("scatter of a scalar or with an index of another rank")
    if is_tensor_value(value):
        if len(value.size) != len(x.size) or any(i > s for i, s in zip(index.size, value.size)):
            raise Unsupported("scatter from a source smaller than its index")
        values = lambda dtype: broadcast_loader(value, value.size, dtype)  # noqa: E731
        operands = (value, index)
    else:
        c = scalar_value(value, g.out.dtype)
        values = lambda dtype: (lambda ops, idx: ops.constant(c, dtype))  # noqa: E731
        operands = (index,)
    return scatter_into(g, stores_into(g, x), index.size, _position_along(x, d, index, False), values, *operands,
                        reduce=None)


def _along_checked(x: Any, dim: int, index: Any, src: Any, what: str) -> Callable[..., list[Any]]:
    """The position of src's elements at index's positions along dim (scatter_add, scatter_reduce)."""
    d = norm_dim(dim, len(x.size))
    if not len(x.size) or len(index.size) != len(x.size) or len(src.size) != len(x.size) \
            or any(i > s for i, s in zip(index.size, src.size)):
        raise Unsupported(f"{what} of these shapes")
    return _position_along(x, d, index, False)


@register(aten.scatter_add)
def _scatter_add(g, x, dim, index, src):
    return scatter_into(g, x, index.size, _along_checked(x, dim, index, src, "scatter_add"),
                        lambda dtype: broadcast_loader(src, src.size, dtype), src, index)


@register(aten.scatter_reduce.two)
def _scatter_reduce(g, x, dim, index, src, reduce, include_self=True):
    """sum, amax and amin as atomic adds, maxima and minima at their positions; mean (floating
    dtypes) as a sum and a count there, then their quotient. Without include_self, the positions
    written first take the reduction's identity (a store scatter), so x's values there take no
    part. prod stays ATen's op: there is no atomic product. A NaN wins a maximum or minimum as in
    eager: atomics compare NaN's bits (on the GPU) or drop it (the interpreter), so the NaNs are
    counted apart and put back after."""
    if reduce not in ("sum", "amax", "amin", "mean"):
        raise Unsupported(f"scatter_reduce {reduce}")
    out_dtype = g.out.dtype
    floating = out_dtype.is_floating_point
    if out_dtype == torch.bool:
        raise Unsupported("scatter_reduce of bool values (no bool atomics)")
    if reduce == "mean" and not floating:
        raise Unsupported("scatter_reduce mean of an integer dtype (floor division)")
    position = _along_checked(x, dim, index, src, "scatter_reduce")
    size = index.size
    if reduce in ("amax", "amin"):
        if floating:
            identity = float("-inf") if reduce == "amax" else float("inf")
        else:
            identity = torch.iinfo(out_dtype).min if reduce == "amax" else torch.iinfo(out_dtype).max
    else:
        identity = 0
    constant = lambda c: lambda dtype: lambda ops, idx: ops.constant(c, dtype)  # noqa: E731
    extremum = reduce in ("amax", "amin") and floating

    def values(dtype: torch.dtype) -> Callable[..., Any]:
        sl = broadcast_loader(src, src.size, dtype)
        if not extremum:
            return sl

        def without_nans(ops, idx):     # a NaN takes no part in the atomics (counted below)
            v = sl(ops, idx)
            return ops.where(ops.isnan(v), ops.constant(identity, dtype), v)
        return without_nans

    base = x if include_self else scatter_into(g, x, size, position, constant(identity), index, reduce=None)
    combined = scatter_into(g, base, size, position, values, src, index, reduce="sum" if reduce == "mean" else reduce)
    if reduce != "mean" and not extremum:
        return combined
    dtype = upcast(out_dtype)
    if reduce == "mean":
        count = scatter_into(g, 1.0 if include_self else 0.0, size, position, constant(1.0), index)
    else:   # the NaNs among the values at each position
        def nans(dt: torch.dtype) -> Callable[..., Any]:
            sl = broadcast_loader(src, src.size, dt)
            return lambda ops, idx: ops.to_dtype(ops.isnan(sl(ops, idx)), dt)
        count = scatter_into(g, 0.0, size, position, nans, src, index)
    sl, cl, xl = combined.loader(), count.loader(), broadcast_loader(x, x.size, dtype)
    zero = lambda ops: ops.constant(0.0, dtype)  # noqa: E731

    def mean(ops, idx):
        c = cl(ops, idx)
        return ops.where(ops.ne(c, zero(ops)), ops.truediv(sl(ops, idx), c), xl(ops, idx))

    def with_nans(ops, idx):
        nan = ops.ne(cl(ops, idx), zero(ops))
        if include_self:
            nan = ops.logical_or(nan, ops.isnan(xl(ops, idx)))
        return ops.where(nan, ops.constant(float("nan"), dtype), sl(ops, idx))
    return Pointwise(g.out.device, out_dtype, tuple(int(s) for s in g.out.shape),
                     mean if reduce == "mean" else with_nans, origins_of(x, src, index) | g.current_origins())
