"""Gather-like and concatenating lowerings: gather, index_select, embedding, index (tensor
indices), cat, constant_pad_nd, slice_scatter, select_scatter, diagonal_scatter,
as_strided_scatter, and a scatter of one element per row (a one-hot: cross-entropy's backward).

Note: an index read from a tensor becomes an `ops.indirect` symbol inside the load's index;
negative indices wrap like eager's. Out-of-range pieces (cat, pad, scatter) are `ops.masked`
loads, so no address outside a buffer is ever touched.
"""
from __future__ import annotations

from typing import Any, Sequence

import sympy
import torch

from ..ir.index import FloorDiv, ModIndex, is_dense
from ..ir.values import Pointwise, is_tensor_value
from .common import norm_dim, origins_of, upcast
from .registry import Unsupported, register

aten = torch.ops.aten


def _out(g: Any, fn, *inputs: Any) -> Pointwise:
    size = tuple(int(s) for s in g.out.shape)
    return Pointwise(g.out.device, g.out.dtype, size, fn, origins_of(*inputs))


def _cast(ops, v, src: torch.dtype, dst: torch.dtype):
    return v if upcast(src) == upcast(dst) else ops.to_dtype(v, upcast(dst))


@register(aten.gather)
def _gather(g, x, dim, index, sparse_grad=False):
    d = norm_dim(dim, len(x.size))
    xl, il = x.loader(), index.loader()
    if len(x.size) == 0:
        raise Unsupported("gather of a scalar")
    n = x.size[d]

    def fn(ops, idx):
        i = ops.indirect(il(ops, idx), n)
        sub = list(idx)
        sub[d] = i
        return xl(ops, sub)
    return _out(g, fn, x, index)


@register(aten.index_select)
def _index_select(g, x, dim, index):
    d = norm_dim(dim, len(x.size))
    if len(x.size) == 0:
        raise Unsupported("index_select of a scalar")
    xl, il = x.loader(), index.loader()
    n = x.size[d]

    def fn(ops, idx):
        i = ops.indirect(il(ops, [idx[d]] if len(index.size) == 1 else []), n)
        sub = list(idx)
        sub[d] = i
        return xl(ops, sub)
    return _out(g, fn, x, index)


@register(aten.embedding)
def _embedding(g, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    wl, il = weight.loader(), indices.loader()
    k = len(indices.size)
    n = weight.size[0]

    def fn(ops, idx):
        i = ops.indirect(il(ops, idx[:k]), n)
        return wl(ops, [i, idx[k]])
    return _out(g, fn, weight, indices)


def advanced_position(x_size: Sequence[int], indices: Sequence[Any]) -> tuple[tuple[int, ...], Any]:
    """Advanced indexing of a tensor of `x_size` by `indices` (tensors or None, eager's rules): the
    size of the indexed result, and fn(ops, idx) -> the index into x of the result's element idx.
    The broadcast index dims take the first indexed dim's place when the indexed dims are adjacent,
    else they come first. Shared by `index` (a gather) and `index_put` (a scatter)."""
    tensors = [(pos, t) for pos, t in enumerate(indices) if t is not None]
    if not tensors or any(t.dtype in (torch.bool, torch.uint8) for _, t in tensors):
        raise Unsupported("boolean or empty index")
    positions = [p for p, _ in tensors]
    bshape = tuple(torch.broadcast_shapes(*[tuple(t.size) for _, t in tensors]))
    nb = len(bshape)
    first = positions[0] if positions == list(range(positions[0], positions[0] + len(positions))) else 0
    loaders = [(p, t.loader(), tuple(t.size)) for p, t in tensors]
    rest = [k for k in range(len(x_size)) if k not in positions]
    size = tuple(int(x_size[k]) for k in rest[:first]) + bshape + tuple(int(x_size[k]) for k in rest[first:])

    def fn(ops, idx):
        bidx = idx[first:first + nb]
        other = list(idx[:first]) + list(idx[first + nb:])
        sub = [None] * len(x_size)
        for p, ld, tsize in loaders:
            lead = nb - len(tsize)
            tid = [sympy.Integer(0) if s == 1 else bidx[lead + j] for j, s in enumerate(tsize)]
            sub[p] = ops.indirect(ld(ops, tid), x_size[p])
        it = iter(other)
        for k in rest:
            sub[k] = next(it)
        return sub
    return size, fn


@register(aten.index)
def _index(g, x, indices):
    size, position = advanced_position(x.size, indices)
    if size != tuple(int(s) for s in g.out.shape):
        raise Unsupported("index shape")
    xl = x.loader()
    return _out(g, lambda ops, idx: xl(ops, position(ops, idx)), x, *[t for t in indices if t is not None])


@register(aten.cat)
def _cat(g, tensors, dim=0):
    out_size = tuple(int(s) for s in g.out.shape)
    nd = len(out_size)
    d = norm_dim(dim, nd)
    pieces = []
    off = 0
    for t in tensors:
        if len(t.size) == 1 and t.size[0] == 0 and nd != 1:
            continue  # legacy empty tensor, skipped by eager too
        pieces.append((off, t.size[d], t.loader(), t.dtype))
        off += t.size[d]
    pieces = [p for p in pieces if p[1] > 0]
    total = off
    out_dtype = g.out.dtype
    cd = upcast(out_dtype)

    def fn(ops, idx):
        # piece k covers [start, start + length) along d; later pieces are applied first so that each
        # index ends up with the one piece whose range holds it; loads are masked to that range
        if not pieces:
            return ops.constant(0, cd)
        i = ops.index_expr(idx[d], torch.int64)
        result = None
        for start, length, ld, dt in reversed(pieces):
            sub = list(idx)
            sub[d] = idx[d] - start

            def body(ld=ld, sub=sub, dt=dt):
                return _cast(ops, ld(ops, sub), dt, out_dtype)
            conds = []
            if start > 0:
                conds.append(ops.ge(i, ops.constant(start, torch.int64)))
            if start + length < total:
                conds.append(ops.lt(i, ops.constant(start + length, torch.int64)))
            if not conds:
                return body()
            mask = conds[0] if len(conds) == 1 else ops.logical_and(conds[0], conds[1])
            value = ops.masked(mask, body, 0)
            result = value if result is None else ops.where(mask, value, result)
        return result
    return _out(g, fn, *tensors)


@register(aten.constant_pad_nd)
def _pad(g, x, pad, value=0):
    out_dtype = g.out.dtype  # bound now: bodies run after lowering moves on
    nd = len(x.size)
    before = [0] * nd
    for k in range(len(pad) // 2):
        before[nd - 1 - k] = pad[2 * k]
    xl = x.loader()
    in_size = list(x.size)

    def fn(ops, idx):
        sub = [i - b for i, b in zip(idx, before)]
        cond = None
        for k in range(nd):
            if pad[2 * (nd - 1 - k)] if 2 * (nd - 1 - k) < len(pad) else 0:
                pass
            needs_lo = before[k] > 0
            needs_hi = 2 * (nd - 1 - k) + 1 < len(pad) and pad[2 * (nd - 1 - k) + 1] > 0
            iv = ops.index_expr(sub[k], torch.int64) if (needs_lo or needs_hi) else None
            if needs_lo:
                c = ops.ge(iv, ops.constant(0, torch.int64))
                cond = c if cond is None else ops.logical_and(cond, c)
            if needs_hi:
                c = ops.lt(iv, ops.constant(in_size[k], torch.int64))
                cond = c if cond is None else ops.logical_and(cond, c)
        if cond is None:
            return _cast(ops, xl(ops, sub), x.dtype, out_dtype)
        return ops.masked(cond, lambda: _cast(ops, xl(ops, sub), x.dtype, out_dtype), value)
    return _out(g, fn, x)


@register(aten.slice_scatter)
def _slice_scatter(g, x, src, dim=0, start=None, end=None, step=1):
    out_dtype = g.out.dtype  # bound now: bodies run after lowering moves on
    nd = len(x.size)
    d = norm_dim(dim, nd)
    n = x.size[d]
    s = 0 if start is None else (start + n if start < 0 else start)
    e = n if end is None else (end + n if end < 0 else end)
    s, e = max(0, min(n, s)), max(0, min(n, e))
    xl, sl = x.loader(), src.loader()

    def fn(ops, idx):
        i = ops.index_expr(idx[d], torch.int64)
        cond = ops.logical_and(ops.ge(i, ops.constant(s, torch.int64)), ops.lt(i, ops.constant(e, torch.int64)))
        if step != 1:
            cond = ops.logical_and(cond, ops.eq(ops.remainder(ops.sub(i, ops.constant(s, torch.int64)),
                                                              ops.constant(step, torch.int64)),
                                                ops.constant(0, torch.int64)))
        sub = list(idx)
        if step == 1:
            sub[d] = idx[d] - s
        else:
            from ..ir.index import FloorDiv
            sub[d] = FloorDiv(idx[d] + (step * n - s), step) - n
        inside = ops.masked(cond, lambda: _cast(ops, sl(ops, sub), src.dtype, out_dtype), 0)
        return ops.where(cond, inside, _cast(ops, xl(ops, idx), x.dtype, out_dtype))
    return _out(g, fn, x, src)


def scatter_one_per_row(g, x, dim, index, value, reduce=None):
    """scatter with one index per row along `dim` (index of size 1 there, x's sizes elsewhere):
    out[.., j, ..] = value (or src[.., 0, ..]) where j == index[.., 0, ..], else x. Why: the
    backward of nll_loss scatters -1 into a zeros tensor of [tokens, vocab]; as this select it fuses
    with what reads it, where ATen would fill and then scatter into a full buffer."""
    d = norm_dim(dim, len(x.size))
    if reduce is not None or not len(x.size) or tuple(index.size) != tuple(x.size[:d]) + (1,) + tuple(x.size[d + 1:]):
        raise Unsupported("scatter other than one index per row")
    tensor_src = is_tensor_value(value)
    if tensor_src and tuple(value.size[:len(index.size)]) != tuple(index.size[:len(value.size)]):
        raise Unsupported("scatter from a source of another shape")
    out_dtype = g.out.dtype
    xl, il = x.loader(), index.loader()
    vl = value.loader() if tensor_src else None

    def fn(ops, idx):
        row = list(idx)
        row[d] = sympy.Integer(0)
        hit = ops.eq(ops.index_expr(idx[d], torch.int64), ops.to_dtype(il(ops, row), torch.int64))
        new = _cast(ops, vl(ops, row), value.dtype, out_dtype) if tensor_src else ops.constant(value, upcast(out_dtype))
        return ops.where(hit, new, _cast(ops, xl(ops, idx), x.dtype, out_dtype))
    return _out(g, fn, *([x, index, value] if tensor_src else [x, index]))


@register(aten.select_scatter)
def _select_scatter(g, x, src, dim, index):
    out_dtype = g.out.dtype  # bound now: bodies run after lowering moves on
    nd = len(x.size)
    d = norm_dim(dim, nd)
    i0 = index + x.size[d] if index < 0 else index
    xl, sl = x.loader(), src.loader()

    def fn(ops, idx):
        cond = ops.eq(ops.index_expr(idx[d], torch.int64), ops.constant(i0, torch.int64))
        sub = list(idx[:d]) + list(idx[d + 1:])
        return ops.where(cond, _cast(ops, sl(ops, sub), src.dtype, out_dtype),
                         _cast(ops, xl(ops, idx), x.dtype, out_dtype))
    return _out(g, fn, x, src)


@register(aten.diagonal_scatter)
def _diagonal_scatter(g, x, src, offset=0, dim1=0, dim2=1):
    """x with src written along a diagonal: what an in-place op on `x.diagonal()` becomes once
    functionalized (a covariance's ridge `c.diagonal().add_(eps)`)."""
    out_dtype = g.out.dtype  # bound now: bodies run after lowering moves on
    nd = len(x.size)
    d1, d2 = norm_dim(dim1, nd), norm_dim(dim2, nd)
    xl, sl = x.loader(), src.loader()

    def fn(ops, idx):
        on = ops.eq(ops.index_expr(idx[d2] - idx[d1], torch.int64), ops.constant(offset, torch.int64))
        sub = [idx[j] for j in range(nd) if j not in (d1, d2)] + [idx[d1] if offset >= 0 else idx[d2]]
        inside = ops.masked(on, lambda: _cast(ops, sl(ops, sub), src.dtype, out_dtype), 0)
        return ops.where(on, inside, _cast(ops, xl(ops, idx), x.dtype, out_dtype))
    return _out(g, fn, x, src)


@register(aten.as_strided_scatter)
def _as_strided_scatter(g, x, src, size, stride, storage_offset=None):
    """x with src written through an as_strided view of its storage (what `fill_diagonal_` becomes
    once functionalized). Each output element's storage position is decoded into the view's
    indices, largest stride first, which is exact where every stride exceeds the span of the
    smaller ones; other views (overlapping, interleaved) stay ATen calls."""
    out_dtype = g.out.dtype  # bound now: bodies run after lowering moves on
    out_stride = [int(s) for s in g.out.stride()]
    if not is_dense([int(s) for s in g.out.shape], out_stride):
        raise Unsupported("as_strided_scatter into a tensor with holes or overlaps")
    offset = int(storage_offset or 0)
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    dims = sorted(((st, sz, k) for k, (sz, st) in enumerate(zip(size, stride)) if sz != 1), reverse=True)
    span = 0
    for st, sz, _ in reversed(dims):
        if st <= span:
            raise Unsupported("as_strided_scatter through overlapping or interleaved strides")
        span += (sz - 1) * st
    xl, sl = x.loader(), src.loader()
    empty = any(sz == 0 for sz in size)
    top = dims[0][0] if dims else 1
    lift = -(-offset // top) if dims else 0   # whole top strides added: a divided position is never negative

    def fn(ops, idx):
        old = _cast(ops, xl(ops, idx), x.dtype, out_dtype)
        if empty:
            return old
        pos = sum((i * s for i, s in zip(idx, out_stride)), sympy.Integer(0)) + lift * top - offset
        view = [sympy.Integer(0)] * len(size)
        conds = []
        rest = pos
        for n, (st, sz, k) in enumerate(dims):
            q = FloorDiv(rest, st)
            lo = lift if n == 0 else 0
            view[k] = q - lo
            qv = ops.index_expr(q, torch.int64)
            conds.append(ops.lt(qv, ops.constant(lo + sz, torch.int64)))
            if lo:
                conds.append(ops.ge(qv, ops.constant(lo, torch.int64)))
            rest = ModIndex(rest, st)
        conds.append(ops.eq(ops.index_expr(rest, torch.int64), ops.constant(0, torch.int64)))
        hit = conds[0]
        for c in conds[1:]:
            hit = ops.logical_and(hit, c)
        inside = ops.masked(hit, lambda: _cast(ops, sl(ops, view), src.dtype, out_dtype), 0)
        return ops.where(hit, inside, old)
    return _out(g, fn, x, src)
