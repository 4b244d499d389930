"""View lowerings: index rewrites, never copies.

Note: a view of a value in memory whose layout equals eager's becomes a `ReinterpretView` with the
strides and offset eager computed (FakeTensor) — exact for every view op, as_strided included.
A view of a lazy value rewrites the index its consumers load with.
"""
from __future__ import annotations

from typing import Any, Sequence

import sympy
import torch

from ..ir.index import FloorDiv, ModIndex, contiguous_strides, prod, row_major_vars
from ..ir.values import Layout, Pointwise, ReinterpretView, strided_of
from .common import norm_dim
from .registry import Unsupported, register

aten = torch.ops.aten


def _same_layout(layout: Layout, fake: torch.Tensor) -> bool:
    if tuple(layout.size) != tuple(fake.shape):
        return False
    return all(sz == 1 or st == fst for sz, st, fst in zip(layout.size, layout.stride, fake.stride()))


def _strided_view(g: Any, x: Any) -> ReinterpretView | None:
    base = strided_of(x)
    fin, fout = g.fake_arg(0), g.out
    if base is None or not isinstance(fout, torch.Tensor) or not _same_layout(base[1], fin):
        return None
    buf, layout = base
    offset = layout.offset + int(fout.storage_offset()) - int(fin.storage_offset())
    if offset < 0:
        return None
    new = Layout(layout.device, layout.dtype, tuple(int(s) for s in fout.shape), tuple(int(s) for s in fout.stride()), offset)
    return ReinterpretView(buf, new)


def _rewrite(g: Any, x: Any, index_fn) -> Pointwise:
    inner = x.loader()
    size = tuple(int(s) for s in g.out.shape)
    return Pointwise(x.device, x.dtype, size, lambda ops, idx: inner(ops, index_fn(list(idx))),
                     getattr(x, "origins", frozenset()))


def view_op(index_fn_builder):
    """Register-ready lowering: strided fast path, else index rewrite built from the args."""
    def lower(g, x, *args, **kwargs):
        v = _strided_view(g, x)
        if v is not None:
            return v
        return _rewrite(g, x, index_fn_builder(g, x, *args, **kwargs))
    return lower


def _reshape_index(old_size: Sequence[int], new_size: Sequence[int]):
    old_size, new_size = list(old_size), list(new_size)

    def fn(idx):
        flat = sympy.Integer(0)
        for i, st in zip(idx, contiguous_strides(new_size)):
            flat = flat + i * st
        return row_major_vars(flat, old_size) if old_size else []
    return fn


@register(aten.view, aten._unsafe_view, aten.reshape)
def _view(g, x, shape):
    if isinstance(g.out, torch.Tensor) and g.out.dtype != x.dtype:
        raise Unsupported("view as another dtype")
    return view_op(lambda g, x, shape: _reshape_index(x.size, g.out.shape))(g, x, shape)


@register(aten.permute)
def _permute(g, x, dims):
    dims = [norm_dim(d, len(x.size)) for d in dims]

    def fn(idx):
        out = [None] * len(dims)
        for new_pos, old_pos in enumerate(dims):
            out[old_pos] = idx[new_pos]
        return out
    return view_op(lambda *a: fn)(g, x, dims)


@register(aten.t, aten.transpose)
def _transpose(g, x, d0=0, d1=1):
    n = len(x.size)
    if n < 2:
        return view_op(lambda *a: (lambda idx: idx))(g, x)
    d0, d1 = norm_dim(d0, n), norm_dim(d1, n)

    def fn(idx):
        idx = list(idx)
        idx[d0], idx[d1] = idx[d1], idx[d0]
        return idx
    return view_op(lambda *a: fn)(g, x)


@register(aten.expand)
def _expand(g, x, size, implicit=False):
    in_size = list(x.size)
    lead = len(g.out.shape) - len(in_size)

    def fn(idx):
        return [sympy.Integer(0) if s == 1 else idx[lead + k] for k, s in enumerate(in_size)]
    return view_op(lambda *a: fn)(g, x)


@register(aten.squeeze)
def _squeeze(g, x, dims=None):
    in_size = list(x.size)
    if dims is None:
        drop = {k for k, s in enumerate(in_size) if s == 1}
    else:
        dims = [dims] if isinstance(dims, int) else dims
        drop = {norm_dim(d, len(in_size)) for d in dims if in_size and in_size[norm_dim(d, len(in_size))] == 1}

    def fn(idx):
        it = iter(idx)
        return [sympy.Integer(0) if k in drop else next(it) for k in range(len(in_size))]
    return view_op(lambda *a: fn)(g, x)


@register(aten.unsqueeze)
def _unsqueeze(g, x, dim):
    d = norm_dim(dim, len(x.size) + 1)

    def fn(idx):
        return idx[:d] + idx[d + 1:]
    return view_op(lambda *a: fn)(g, x)


@register(aten.slice)
def _slice(g, x, dim=0, start=None, end=None, step=1):
    n = len(x.size)
    d = norm_dim(dim, n)
    length = x.size[d]
    s = 0 if start is None else start
    s = max(0, min(length, s + length if s < 0 else s))

    def fn(idx):
        idx = list(idx)
        idx[d] = s + step * idx[d]
        return idx
    return view_op(lambda *a: fn)(g, x)


@register(aten.select)
def _select(g, x, dim, index):
    n = len(x.size)
    d = norm_dim(dim, n)
    i = index + x.size[d] if index < 0 else index

    def fn(idx):
        return list(idx[:d]) + [sympy.Integer(i)] + list(idx[d:])
    return view_op(lambda *a: fn)(g, x)


@register(aten.as_strided)
def _as_strided(g, x, size, stride, storage_offset=None):
    v = _strided_view(g, x)
    if v is not None:
        return v
    real = g.realize(x, g.fake_arg(0))
    v = _strided_view(g, real)
    if v is None:
        raise Unsupported("as_strided of a non-strided value")
    return v


@register(aten.unfold, aten.diagonal, aten.narrow, aten.split_with_sizes, aten.unbind)
def _strided_only(g, x, *args, **kwargs):
    out = g.out
    if isinstance(out, torch.Tensor):
        v = _strided_view(g, x)
        if v is None:
            real = g.realize(x, g.fake_arg(0))
            v = _strided_view(g, real)
        if v is None:
            raise Unsupported("view of a non-strided value")
        return v
    raise Unsupported("multi-output view")
