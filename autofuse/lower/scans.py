"""Scan lowerings: cumsum, cumprod, logcumsumexp, cummax / cummin (values, and indices when read).

Note: a scan is a realized buffer with a `ScanBody` whose body is the input's loader, so a lazy
input (casts, masks, shifts, flips) is computed inside the scan kernel, and pointwise consumers
that read the scan where it writes fuse after it. A scan of `flip(x, [d])` along d whose result is
only flipped back is lowered as the reverse scan of x viewed flipped (flip(x).cumsum(d) ==
flip(reverse_cumsum(x))): the final flip then reads the reverse scan where it writes, so the
reversed-scan idiom `x.flip(d).cumsum(d).flip(d)` is one kernel.

A scan of a few long rows (a cumsum over a flattened tensor, a top-p cumsum over one row of a
vocabulary) would be a few programs, each stepping through its whole row. It is cut into chunks
instead (`split_scan`): one program scans each chunk, one more scan runs over the chunks' totals,
and the output combines each chunk's scan with the total of the chunks before it, a pointwise value
that fuses into what reads it.
"""
from __future__ import annotations

import operator
from typing import Any

import sympy
import torch

from ..ir.index import FloorDiv, ModIndex, is_dense, prod
from ..ir.values import SORTS, ComputedBuffer, Layout, Pointwise, ScanBody
from .common import chunk_view, make_pointwise, norm_dim, origins_of, upcast
from .pointwise import log_add
from .registry import Unsupported, register

aten = torch.ops.aten


def _acc(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: int64 for integers and bool (as ATen), f32 for half types."""
    if dtype == torch.bool or not dtype.is_floating_point:
        return torch.int64
    return upcast(dtype)


def _flips_only_d(node: Any, d: int, ndim: int) -> bool:
    return node.target is aten.flip.default and {norm_dim(k, ndim) for k in node.args[1]} == {d}


def _flipped_source(g: Any, d: int) -> Any | None:
    """The input of the scan's input when that is a flip over exactly the scanned dim and every user
    of the scan flips it back (else a forward scan with the flip as its prologue is one kernel)."""
    ndim = len(g.out.shape)
    arg = g.node.args[0] if g.node is not None and g.node.args else None
    if not isinstance(arg, torch.fx.Node) or not _flips_only_d(arg, d, ndim):
        return None
    users = list(g.node.users)
    if not users or not all(_flips_only_d(u, d, ndim) for u in users):
        return None
    src = arg.args[0]
    return g.env.get(src) if isinstance(src, torch.fx.Node) else None


SPLIT_MAX_ROWS = 32      # more rows than this fill the GPU with one program per row
SPLIT_MIN_LENGTH = 1 << 17   # shorter rows take few steps of one program
SPLIT_CHUNK = 4096       # elements per chunk: one persistent program each


COMBINES = {
    "sum": lambda ops, a, b: ops.add(a, b), "prod": lambda ops, a, b: ops.mul(a, b),
    "max": lambda ops, a, b: ops.maximum(a, b), "min": lambda ops, a, b: ops.minimum(a, b),
    "logaddexp": log_add,
}


def split_scan(g: Any, x: Any, d: int, combine: str, acc: torch.dtype, size: tuple[int, ...]) -> Pointwise | None:
    """The scan of x along d as chunk scans, a scan of the chunks' totals and a pointwise combine
    (module note); None where one program per row suffices. Padding past the row's end is read as
    0: it only reaches positions past the end and the last chunk's total, which nothing reads."""
    n = size[d]
    if combine not in COMBINES or n < SPLIT_MIN_LENGTH or prod(size) // n > SPLIT_MAX_ROWS:
        return None
    c = SPLIT_CHUNK
    b = -(-n // c)
    origins = origins_of(x) | g.current_origins()
    view = chunk_view(x, d, c, acc, 0, origins)
    chunk_size = view.size
    chunks = g.add_computed(ComputedBuffer(g.new_name(), Layout.contiguous(x.device, acc, chunk_size),
                                           ScanBody(chunk_size, d + 1, combine, view.loader(), acc), origins))
    at = chunks.loader()
    total_size = size[:d] + (b,) + size[d + 1:]

    def total(ops, idx):
        return at(ops, list(idx[:d + 1]) + [sympy.Integer(c - 1)] + list(idx[d + 1:]))

    totals = g.add_computed(ComputedBuffer(g.new_name(), Layout.contiguous(x.device, acc, total_size),
                                           ScanBody(total_size, d, combine, total, acc), origins))
    before = totals.loader()
    out_dtype, join = g.out.dtype, COMBINES[combine]

    def out(ops, idx):
        k = FloorDiv(idx[d], c)
        v = at(ops, list(idx[:d]) + [k, ModIndex(idx[d], c)] + list(idx[d + 1:]))
        first = ops.eq(ops.index_expr(k, torch.int64), ops.constant(0, torch.int64))
        prev = ops.masked(ops.logical_not(first), lambda: before(ops, list(idx[:d]) + [k - 1] + list(idx[d + 1:])), 0)
        v = ops.where(first, v, join(ops, prev, v))
        return v if acc == out_dtype else ops.to_dtype(v, out_dtype)

    return Pointwise(x.device, out_dtype, size, out, origins)


def scan(g: Any, x: Any, dim: int, combine: str, acc: torch.dtype) -> Any:
    """The scan of x along dim in acc, stored in the node's output dtype (and strides, when dense)."""
    out = g.out
    size = tuple(int(s) for s in out.shape)
    if tuple(x.size) != size:
        raise Unsupported("scan input and output sizes differ")
    if any(s == 0 for s in size):
        raise Unsupported("scan of no elements")
    if not size or size[norm_dim(dim, len(size))] == 1:  # each element its own prefix (at position 0)
        if combine in ("argmax", "argmin") or (combine in SORTS and SORTS[combine][1]):   # positions
            return Pointwise(x.device, out.dtype, size, lambda ops, idx: ops.constant(0, out.dtype))
        return make_pointwise(g, [x], lambda ops, a: a, acc)
    d = norm_dim(dim, len(size))
    split = None if combine in SORTS else split_scan(g, x, d, combine, acc, size)   # (x flipped included)
    if split is not None:
        return split
    flipped = _flipped_source(g, d) if combine not in ("argmax", "argmin", *SORTS) else None
    source, reverse = (flipped, True) if flipped is not None else (x, False)
    loader, src = source.loader(), upcast(source.dtype)

    def inner(ops, idx):
        v = loader(ops, idx)
        return v if src == acc else ops.to_dtype(v, acc)

    stride = tuple(int(s) for s in out.stride())
    layout = (Layout(x.device, out.dtype, size, stride) if is_dense(size, stride)
              else Layout.contiguous(x.device, out.dtype, size))
    buf = g.add_computed(ComputedBuffer(g.new_name(), layout, ScanBody(size, d, combine, inner, acc, reverse),
                                        origins_of(source) | g.current_origins()))
    if not reverse:
        return buf
    ld, last = buf.loader(), size[d] - 1

    def flip_back(ops, idx):
        idx = list(idx)
        idx[d] = sympy.Integer(last) - idx[d]
        return ld(ops, idx)

    return Pointwise(x.device, out.dtype, size, flip_back)


@register(aten.cumsum)
def _cumsum(g, x, dim, dtype=None):
    return scan(g, x, dim, "sum", _acc(g.out.dtype))


@register(aten.cumprod)
def _cumprod(g, x, dim, dtype=None):
    return scan(g, x, dim, "prod", _acc(g.out.dtype))


@register(aten.logcumsumexp)
def _logcumsumexp(g, x, dim):
    if not g.out.dtype.is_floating_point:
        raise Unsupported("logcumsumexp of integers")
    return scan(g, x, dim, "logaddexp", upcast(g.out.dtype))


@register(aten.cummax, aten.cummin)
def _cummax(g, x, dim):
    """Two scans of x: the values, and (when read) the indices, a scan of (value, position) pairs."""
    values, indices = g.out
    if values.dtype == torch.bool:
        raise Unsupported("cummax of bool")
    combine = "max" if g.node.target.overloadpacket is aten.cummax else "min"
    read = {u.args[1] for u in g.node.users if u.target is operator.getitem and u.users}
    if any(u.target is not operator.getitem for u in g.node.users):
        read = {0, 1}
    saved = g.out
    try:
        g.out = values
        out_values = scan(g, x, dim, combine, upcast(values.dtype))
        if 1 not in read:
            return (out_values, None)
        g.out = indices
        return (out_values, scan(g, x, dim, "arg" + combine, upcast(values.dtype)))
    finally:
        g.out = saved
