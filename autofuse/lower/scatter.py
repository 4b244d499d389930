"""Scatters: accumulating ones as atomic adds (index_put with accumulate, which an embedding's
gradient decomposes to, index_add, scatter_add, scatter_reduce's sum), the others as stores
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
from ..ir.values import ComputedBuffer, InputBuffer, Layout, PointwiseBody, ReinterpretView, ScatterBody, is_tensor_value
from .common import broadcast_loader, norm_dim, origins_of, scalar_value, upcast
from .indexing import advanced_position, scatter_one_per_row
from .registry import Unsupported, register

aten = torch.ops.aten

# dtypes Triton adds atomically on the GPU and in its interpreter (bf16 has no interpreter add, and
# half-precision sums of many terms would round each add)
ATOMIC_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def scatter_into(g: Any, x: Any, size: Sequence[int], position: Callable[..., Sequence[Any]],
                 values: Callable[[torch.dtype], Callable[..., Any]], *operands: Any,
                 accumulate: bool = True) -> ComputedBuffer:
    """x's values with values(dtype)(idx) added (`accumulate`) or written at position(idx) for
    every idx of `size`; `values` makes the loader of the values in the kernel's dtype, `operands`
    are the tensors read."""
    out = g.out
    if torch.are_deterministic_algorithms_enabled():
        raise Unsupported("deterministic algorithms: ATen's sorted scatter")
    if not accumulate and isinstance(x, (InputBuffer, ReinterpretView)):
        # a static cache updated in place: ATen's in-place op writes only the new positions, where
        # a generated scatter would copy the whole cache first
        raise Unsupported("a store scatter into a graph input or a view: ATen's in-place op")
    if accumulate and out.dtype not in ATOMIC_DTYPES:
        raise Unsupported(f"no atomic add of {out.dtype}")
    shape = tuple(int(s) for s in out.shape)
    stride = tuple(int(s) for s in out.stride())
    layout = Layout(x.device, out.dtype, shape, stride) if is_dense(shape, stride) \
        else Layout.contiguous(x.device, out.dtype, shape)
    dtype = upcast(out.dtype)
    origins = origins_of(x, *operands) | g.current_origins()
    target = g.add_computed(ComputedBuffer(g.new_name(), layout,
                                           PointwiseBody(shape, broadcast_loader(x, shape, dtype)), origins))
    body = ScatterBody(tuple(int(s) for s in size), values(dtype), position, target.name, accumulate)
    return g.add_computed(ComputedBuffer(g.new_name(), layout, body, origins))


@register(aten.index_put)
def _index_put(g, x, indices, values, accumulate=False):
    size, position = advanced_position(x.size, indices)
    return scatter_into(g, x, size, position, lambda dtype: broadcast_loader(values, size, dtype),
                        values, *[t for t in indices if t is not None], accumulate=bool(accumulate))


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
    return scatter_into(g, x, source.size, _position_along(x, d, index, True),
                        lambda dtype: broadcast_loader(source, source.size, dtype), source, index, accumulate=False)


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
    return scatter_into(g, x, index.size, _position_along(x, d, index, False), values, *operands,
                        accumulate=False)


@register(aten.scatter_add)
def _scatter_add(g, x, dim, index, src):
    d = norm_dim(dim, len(x.size))
    if not len(x.size) or len(index.size) != len(x.size) or len(src.size) != len(x.size) \
            or any(i > s for i, s in zip(index.size, src.size)):
        raise Unsupported("scatter_add of these shapes")
    return scatter_into(g, x, index.size, _position_along(x, d, index, False),   # src's elements at index's positions
                        lambda dtype: broadcast_loader(src, src.size, dtype), src, index)


@register(aten.scatter_reduce.two)
def _scatter_reduce(g, x, dim, index, src, reduce, include_self=True):
    if reduce != "sum" or not include_self:
        raise Unsupported(f"scatter_reduce {reduce}" + ("" if include_self else " without self"))
    return _scatter_add(g, x, dim, index, src)
