"""Reduction lowerings: sum, mean, prod, amax, amin, argmax, argmin, any, all, var / var_mean
(two-pass: mean first, then the sum of squared deviations), logsumexp, max/min with indices,
topk of a few largest elements of short rows, and histc into few bins.

Note: a reduction's result is stored in its accumulation dtype (f32 for half inputs) and cast to
the output dtype by a lazy pointwise, so a half-precision sum never overflows in memory. A
sum, product, any or all over fewer than UNROLL_BELOW elements (a mixture of experts' weighted sum
over its 2 routed experts, a norm over 3 coordinates) is a lazy pointwise combining its elements
one by one, as Inductor unrolls it: it fuses into the kernels around it instead of a reduction
kernel of its own.

argmax and argmin do not combine from partial results in one kernel (a split config holds one value
per chunk, not a value and its position), so over few long rows (a whole tensor, a row of logits)
they are lowered as chunks (`split_arg_reduction`): each chunk's extremum and its position in one
kernel, then the chunk holding the row's extremum, and the position inside it read back.

topk of k <= TOPK_MAX_K largest elements of rows of at most TOPK_MAX_ROW (a mixture of experts'
router: 2 of 8 experts per token) is k rounds of two reductions over the row, each round's maximum
of the elements not yet picked and the first position holding it: reductions over one row that
share its kernel with the softmax before them and the normalization after them, where ATen's topk
is a kernel and a host call of its own. The k smallest, and more than TOPK_MAX_K, are the first k
of the rows sorted (lower/sort.py), where a row fits a block. nanmedian is the sorted rows read at
a rank that a count of each row's numbers (a sum) gives.

histc over a given range is a count per bin: a sum over the elements of whether each falls in
the bin, for few bins x elements (a mixture of experts' tokens per expert: 8 bins of 4096 expert
ids) — deterministic, and in the kernels around it, where ATen's histc is a call of its own.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import sympy
import torch

from ..ir.index import FloorDiv, ModIndex, make_vars, simplify_index
from ..ir.ops import analyze
from ..ir.values import ComputedBuffer, Layout, Pointwise, PointwiseBody, ReductionBody
from .common import chunk_view, make_pointwise, norm_dim, origins_of, upcast
from .registry import Unsupported, register
from .sort import at_ranks, median_rows, sorted_first
from .sorted_keys import sorted_key_counts

aten = torch.ops.aten


def _dims(x: Any, dims: Any) -> list[int]:
    """The reduced dims, normalized; none for a 0-d tensor, whose dim 0 or -1 eager accepts and
    reduces as the tensor itself."""
    n = len(x.size)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(n))
    if isinstance(dims, int):
        dims = [dims]
    normalized = sorted({norm_dim(d, n) for d in dims})
    return normalized if n else []


ORDER_FREE = frozenset({"sum", "prod", "max", "min", "any", "all"})
UNROLL_BELOW = 8   # Inductor's unroll_reductions_threshold
# max and min keep their kernel: a softmax's max is read by every element of its row and again by
# the sum, so an unrolled max makes the row's shifted values a stored buffer (two kernels over the
# tensor, where the max's kernel also takes the unrolled sum and the output: one)
UNROLLED = {"sum": "add", "prod": "mul", "any": "logical_or", "all": "logical_and"}


def _simplified_reads(x: Any, in_size: tuple[int, ...]) -> tuple[list[sympy.Symbol], list[sympy.Expr]]:
    """x's index variables and the indices of its loads, simplified with the variables' ranges (a
    view's digits joined back, `ir/index.simplify_index`): what the r order is read from."""
    idx = make_vars("i", len(in_size))
    ranges = dict(zip(idx, in_size))
    return idx, [simplify_index(sympy.sympify(index), ranges) for _, index in analyze(x.loader(), idx).loads]


def _memory_order(g: Any, reads: tuple[list[sympy.Symbol], list[sympy.Expr]], in_size: tuple[int, ...],
                  dims: list[int], rtype: str) -> list[int]:
    """The reduced dims in the memory order of what the reduction reads, so the innermost r variable
    walks contiguous memory: a sum over a transposed tensor then reads it row by row, and a sum over
    channels and positions of a channels-last activation reads channels innermost. The order is
    that of the input's reads where one moves linearly along every reduced dim (the layout autofuse
    stored, which may differ from eager's), else eager's layout of the input. Only for reductions
    whose result does not depend on the order they visit."""
    if len(dims) < 2 or rtype not in ORDER_FREE:
        return dims
    stride = _read_strides(reads, in_size, dims) or _input_strides(g, in_size)
    if stride is None:
        return dims
    return sorted(dims, key=lambda d: (-stride[d] if in_size[d] != 1 else 0, d))


def _read_strides(reads: tuple[list[sympy.Symbol], list[sympy.Expr]], in_size: tuple[int, ...],
                  dims: Sequence[int]) -> list[int] | None:
    """The steps of x's first read that moves linearly along every reduced dim of more than one
    element (a pooled value's window loads do; a group norm's [N, G, C/G, H*W] view of a
    channels-last activation does once the view's digits are joined back), per dim; None where no
    read does."""
    idx, loads = reads
    moving = [idx[d] for d in dims if in_size[d] != 1]
    for e in loads:
        steps = [e.coeff(v) for v in idx]
        rest = e - sum(c * v for c, v in zip(steps, idx))
        if all(c.is_Integer for c in steps) and all(steps[d] != 0 for d in dims if in_size[d] != 1) \
                and not rest.free_symbols & set(moving):
            return [int(c) for c in steps]
    return None


def _digit_orders(reads: tuple[list[sympy.Symbol], list[sympy.Expr]], in_size: tuple[int, ...],
                  dims: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Reduced dims to visit in another order: {dim: (C, D)} where x's first read of the dim splits it
    into a quotient (i // D, C values) and a remainder (i % D) and the quotient steps through memory
    by less than the remainder does. Such a dim is visited remainder-major, quotient-minor. Why: a
    group norm written as `x.view(N, G, -1)` over a channels-last activation reduces one flat r dim
    of (channel, position) digits, channels 1 apart in memory and positions C apart; walked in that
    order, each 32-byte sector of a group's channels is read once per channel, thousands of elements
    apart (the same walk over F.group_norm's 4-D view ran its statistics at 4x Inductor's time,
    docs/defaults.md). Only for reductions whose result does not depend on the order they visit."""
    idx, loads = reads
    out: dict[int, tuple[int, int]] = {}
    for d in dims:
        v, size = idx[d], in_size[d]
        index = next((e for e in loads if v in e.free_symbols), None)
        if index is None:
            continue
        divisors = sorted({int(a.args[1]) for a in index.atoms(FloorDiv) if a.args[0] == v and a.args[1].is_Integer},
                          reverse=True)
        rest = {u: 0 for u in index.free_symbols if u != v}

        def at(i: int) -> int:
            return int(index.subs(rest).subs(v, i))
        for D in divisors:
            if 1 < D < size and size % D == 0:
                base = at(0)
                if abs(at(D) - base) < abs(at(1) - base):
                    out[d] = (size // D, D)
                break
    return out


def _input_strides(g: Any, in_size: tuple[int, ...]) -> Sequence[int] | None:
    """The strides eager gives the reduction's input, None when its fake value is not of that shape."""
    try:
        fake = g.fake_arg(0)
    except (AttributeError, IndexError):
        return None
    if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != in_size:
        return None
    return fake.stride()


def _reduces_innermost(g: Any, in_size: tuple[int, ...], dims: Sequence[int]) -> bool:
    """Are the reduced dims the innermost in memory of the input (as eager lays it out; logical
    order for a value of another shape)? Then the reduction reads rows, else columns."""
    stride = _input_strides(g, in_size)
    order = sorted(range(len(in_size)), key=lambda k: (-stride[k], k)) if stride is not None else range(len(in_size))
    dims_in_order = [k for k in order if in_size[k] != 1]
    reduced = {k for k in dims if in_size[k] != 1}
    return set(dims_in_order[len(dims_in_order) - len(reduced):]) == reduced


def reduce(g: Any, x: Any, dims: Sequence[int], keepdim: bool, rtype: str, acc_dtype: torch.dtype,
           map_fn: Callable[..., Any] | None = None, out_dtype: torch.dtype | None = None) -> Any:
    """A realized reduction of x over dims (stored as acc/out dtype), viewed with or without keepdim."""
    in_size = tuple(x.size)
    reads = _simplified_reads(x, in_size) if rtype in ORDER_FREE else ([], [])
    dims = _memory_order(g, reads, in_size, list(dims), rtype)
    kept = [k for k in range(len(in_size)) if k not in dims]
    rsize = tuple(in_size[d] for d in dims)
    out_size = tuple(1 if k in dims else s for k, s in enumerate(in_size)) if keepdim else tuple(in_size[k] for k in kept)
    loader = x.loader()
    src = upcast(x.dtype)
    store_dtype = out_dtype or acc_dtype
    if 0 in rsize:
        return _empty_reduction(x, out_size, rtype, store_dtype, g)

    k = _rows_reduced_before(g, x, in_size, dims) if rtype == "sum" else None
    if k is not None:   # per-row sums first (they share the rows' kernel), then their total
        rows = reduce(g, x, list(range(k, len(in_size))), False, "sum", acc_dtype, map_fn)
        total = reduce(g, rows, list(range(k)), False, "sum", acc_dtype, out_dtype=out_dtype)
        if not keepdim:
            return total
        load_total = total.loader()
        return Pointwise(x.device, total.dtype, out_size, lambda ops, idx: load_total(ops, []),
                         origins_of(x) | g.current_origins())

    digits = _digit_orders(reads, in_size, dims) if rtype in ORDER_FREE else {}

    def inner(ops, idx, ridx):
        full = [None] * len(in_size)
        if keepdim:
            for k in kept:
                full[k] = idx[k]
        else:
            for pos, k in enumerate(kept):
                full[k] = idx[pos]
        for pos, d in enumerate(dims):
            if d in digits:   # remainder-major: r = rem * C + quo
                c, dd = digits[d]
                full[d] = ModIndex(ridx[pos], c) * dd + FloorDiv(ridx[pos], c)
            else:
                full[d] = ridx[pos]
        v = loader(ops, full)
        if map_fn is not None:
            v = map_fn(ops, v)
        elif src != acc_dtype:
            v = ops.to_dtype(v, acc_dtype)
        return v

    if rtype in UNROLLED and math.prod(rsize) < UNROLL_BELOW and out_dtype is None:
        return _unrolled(g, x, out_size, rsize, UNROLLED[rtype], inner, acc_dtype)
    layout = Layout.contiguous(x.device, store_dtype, out_size)
    buf = ComputedBuffer(g.new_name(), layout, ReductionBody(out_size, rsize, rtype, inner, acc_dtype),
                         origins_of(x) | g.current_origins())
    return g.add_computed(buf)


def _rows_reduced_before(g: Any, x: Any, in_size: tuple[int, ...], dims: Sequence[int]) -> int | None:
    """k when a sum of every element of x reads a reduction over x's rows, the rows being x's first
    k dims (a KL divergence of a log-softmax summed over the whole tensor: the log-softmax's row
    statistics), else None. Summed row by row first, the terms are computed in the kernel that
    computes the statistics (a later pass over the same rows) instead of a whole-tensor kernel
    reading the rows again; the rows' sums are then totalled, as Inductor splits such a sum along
    the reduction's existing rows."""
    if len(in_size) < 2 or set(dims) != set(range(len(in_size))) or not isinstance(x, Pointwise):
        return None
    idx = make_vars("i", len(in_size))
    loads = analyze(x.inner_fn, idx).loads
    computed = {b.name: b for b in g.buffers if isinstance(b, ComputedBuffer)}
    for k in range(1, len(in_size)):
        rows, row = math.prod(in_size[:k]), math.prod(in_size[k:])
        if rows == 1 or row == 1:
            continue
        for name, index in loads:   # one statistic per row: read at an index of the row dims alone
            buf = computed.get(name)
            if (buf is not None and math.prod(buf.body.size) == rows and _reduces_rows(buf, row, computed)
                    and sympy.sympify(index).free_symbols <= set(idx[:k])):
                return k
    return None


def _reduces_rows(buf: ComputedBuffer, row: int, computed: dict[str, ComputedBuffer], depth: int = 2) -> bool:
    """Is buf a reduction over rows of `row` elements, or a pointwise of its size computed from one
    (a layer norm's mean and reciprocal deviation after their sums)?"""
    if isinstance(buf.body, ReductionBody):
        return math.prod(buf.body.rsize) == row
    if depth == 0 or not isinstance(buf.body, PointwiseBody):
        return False
    names = analyze(buf.body.inner_fn, make_vars("i", len(buf.body.size))).read_names
    return any((b := computed.get(n)) is not None and math.prod(b.body.size) == math.prod(buf.body.size)
               and _reduces_rows(b, row, computed, depth - 1) for n in set(names))


def _unrolled(g: Any, x: Any, out_size: tuple[int, ...], rsize: tuple[int, ...], combine: str,
              inner: Callable[..., Any], dtype: torch.dtype) -> Pointwise:
    """The reduction as a lazy pointwise of its accumulation dtype: inner's values at every reduced
    position, combined in order with the math op `combine`."""
    points = [[sympy.Integer(k) for k in p] for p in itertools.product(*(range(n) for n in rsize))]

    def fn(ops, idx):
        acc = None
        for ridx in points:
            v = inner(ops, idx, ridx)
            acc = v if acc is None else getattr(ops, combine)(acc, v)
        return acc
    return Pointwise(x.device, dtype, tuple(out_size), fn, origins_of(x) | g.current_origins())


def _empty_reduction(x: Any, out_size: Sequence[int], rtype: str, dtype: torch.dtype, g: Any) -> Pointwise:
    """A reduction over no elements is its identity: sum 0, prod 1, any False, all True, max -inf
    (logsumexp's inner max; eager rejects amax/argmax of nothing)."""
    cd = upcast(dtype)
    if rtype in ("sum", "prod", "any", "all"):
        value: Any = {"sum": 0, "prod": 1, "any": False, "all": True}[rtype]
    elif rtype in ("max", "min") and cd.is_floating_point:
        value = float("-inf") if rtype == "max" else float("inf")
    else:
        raise Unsupported(f"{rtype} of no elements")
    return Pointwise(x.device, dtype, tuple(out_size), lambda ops, idx: ops.constant(value, cd),
                     origins_of(x) | g.current_origins())


def _finish(g: Any, buf: Any, fn: Callable[..., Any] | None = None) -> Pointwise:
    """Cast a reduction buffer to the node's output dtype, optionally through fn."""
    out = g.out
    cd = upcast(out.dtype)
    f = fn or (lambda ops, a: a)
    return make_pointwise(g, [buf], f, cd if buf.dtype != torch.bool else torch.bool)


def _acc(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool or not dtype.is_floating_point:
        return torch.int64
    return upcast(dtype)


@register(aten.sum)
def _sum(g, x, dims=None, keepdim=False, dtype=None):
    if isinstance(dims, torch.dtype):  # sum.default(x, dtype)
        dims = None   # sum(x, dtype): the output's dtype is that dtype
    acc = _acc(g.out.dtype)
    buf = reduce(g, x, _dims(x, dims), keepdim, "sum", acc,
                 map_fn=lambda ops, v: ops.to_dtype(v, acc))
    return buf if buf.dtype == g.out.dtype else _finish(g, buf)


@register(aten.mean)
def _mean(g, x, dims=None, keepdim=False, dtype=None):
    if isinstance(dims, torch.dtype):
        dims = None   # sum(x, dtype): the output's dtype is that dtype
    acc = upcast(g.out.dtype)
    if not acc.is_floating_point:
        raise Unsupported("integer mean")
    d = _dims(x, dims)
    n = 1
    for k in d:
        n *= x.size[k]
    buf = reduce(g, x, d, keepdim, "sum", acc, map_fn=lambda ops, v: ops.to_dtype(v, acc))
    return make_pointwise(g, [buf, float(n)], lambda ops, s, c: ops.truediv(s, c), acc)


@register(aten.prod)
def _prod(g, x, dim=None, keepdim=False, dtype=None):
    if isinstance(dim, torch.dtype):
        dim = None
    acc = _acc(g.out.dtype)
    buf = reduce(g, x, _dims(x, dim), keepdim, "prod", acc, map_fn=lambda ops, v: ops.to_dtype(v, acc))
    return buf if buf.dtype == g.out.dtype else _finish(g, buf)


@register(aten.amax, aten.amin)
def _amax(g, x, dims=None, keepdim=False):
    return _extremum(g, x, dims, keepdim, "max" if g.node.target.overloadpacket is aten.amax else "min")


def _extremum(g, x, dims, keepdim: bool, rtype: str):
    """The max or min over dims: amax / amin, and x.max() / x.min() over every element."""
    if any(x.size[d] == 0 for d in _dims(x, dims)):
        raise Unsupported("empty max")
    acc = upcast(x.dtype) if x.dtype != torch.bool else torch.bool
    buf = reduce(g, x, _dims(x, dims), keepdim, rtype, acc, map_fn=lambda ops, v: v)
    return buf if buf.dtype == g.out.dtype else _finish(g, buf)


SPLIT_ARG_MAX_ROWS = 32          # more rows than this fill the GPU with one program per row
SPLIT_ARG_MIN_LENGTH = 1 << 17   # shorter rows take few steps of one program
SPLIT_ARG_CHUNK = 4096


def split_arg_reduction(g: Any, x: Any, d: int, keepdim: bool, rtype: str
                        ) -> tuple[Pointwise, ComputedBuffer] | None:
    """argmax / argmin of x over dim d from chunks (module note), and the chunks' extrema (of which
    the max or min over d is the row's); None where one program per row suffices. Positions past
    the row's end read the extremum's identity (-inf or the dtype's lowest for argmax): a tie goes
    to the first position, so they are never picked over an element; a NaN is the max and the min,
    as in eager, in its chunk and across chunks."""
    size = tuple(x.size)
    n = size[d]
    if n < SPLIT_ARG_MIN_LENGTH or math.prod(size) // n > SPLIT_ARG_MAX_ROWS:
        return None
    c = SPLIT_ARG_CHUNK
    b = -(-n // c)
    acc = upcast(x.dtype)
    is_max = rtype == "argmax"
    if acc.is_floating_point:
        pad = float("-inf") if is_max else float("inf")
    else:
        pad = torch.iinfo(acc).min if is_max else torch.iinfo(acc).max
    origins = origins_of(x) | g.current_origins()
    chunks = chunk_view(x, d, c, acc, pad, origins)
    best = reduce(g, chunks, [d + 1], False, "max" if is_max else "min", acc, map_fn=lambda ops, v: v)
    where = reduce(g, chunks, [d + 1], False, rtype, acc, map_fn=lambda ops, v: v, out_dtype=torch.int64)
    chunk = reduce(g, best, [d], False, rtype, acc, map_fn=lambda ops, v: v, out_dtype=torch.int64)
    at_chunk, at_where = chunk.loader(), where.loader()
    out_size = size[:d] + ((1,) if keepdim else ()) + size[d + 1:]

    def out(ops, idx):
        rest = list(idx[:d]) + list(idx[d + 1:] if keepdim else idx[d:])
        k = at_chunk(ops, rest)
        inside = at_where(ops, rest[:d] + [ops.indirect(k, b)] + rest[d:])
        return ops.add(ops.mul(k, ops.constant(c, torch.int64)), inside)

    return Pointwise(x.device, torch.int64, out_size, out, origins), best


@register(aten.argmax, aten.argmin)
def _argmax(g, x, dim=None, keepdim=False):
    rtype = "argmax" if g.node.target.overloadpacket is aten.argmax else "argmin"
    if x.dtype == torch.bool:
        raise Unsupported("argmax of bool")
    if dim is None:
        n = 1
        for s in x.size:
            n *= s
        if n == 0:
            raise Unsupported("argmax of no elements")
        flat = Pointwise(x.device, x.dtype, (n,), _flat_loader(x), getattr(x, "origins", frozenset()))
        split = split_arg_reduction(g, flat, 0, False, rtype)
        buf = split[0] if split else \
            reduce(g, flat, [0], False, rtype, upcast(x.dtype), map_fn=lambda ops, v: v, out_dtype=torch.int64)
        if keepdim:  # eager: every dim kept with size 1
            ld = buf.loader()
            return Pointwise(x.device, torch.int64, (1,) * len(x.size), lambda ops, idx: ld(ops, []))
        return buf
    d = norm_dim(dim, len(x.size))
    if x.size and x.size[d] == 0:
        raise Unsupported("empty argmax")
    split = split_arg_reduction(g, x, d, keepdim, rtype) if x.size else None
    return split[0] if split else reduce(g, x, [d] if x.size else [], keepdim, rtype, upcast(x.dtype),
                                         map_fn=lambda ops, v: v, out_dtype=torch.int64)


TOPK_MAX_K = 8
TOPK_MAX_ROW = 1024


@register(aten.topk)
def _topk(g, x, k, dim=-1, largest=True, sorted=True):
    """The k largest elements along dim, in descending order, with their positions (module note):
    a NaN is larger than every number, as in eager; equal values come in the order of their
    positions. The k smallest (largest=False, where NaN comes last) and more than TOPK_MAX_K are
    the first k of each row sorted (lower/sort.py), where the row fits a block."""
    values_out, indices_out = g.out
    if not x.size or x.dtype == torch.bool:
        raise Unsupported("topk of a scalar or of bools")
    d = norm_dim(dim, len(x.size))
    n = x.size[d]
    if not largest or k > TOPK_MAX_K:
        if not 0 < k <= n:
            raise Unsupported(f"topk of {k} of {n}")
        return sorted_first(g, x, d, k, descending=largest)
    if not 0 < k <= min(TOPK_MAX_K, n) or n > TOPK_MAX_ROW:
        raise Unsupported(f"topk of {k} of {n}: beyond the rounds of reductions it is lowered as")
    acc = upcast(x.dtype)
    lowest = float("-inf") if acc.is_floating_point else torch.iinfo(acc).min
    value, origins = x.loader(), origins_of(x) | g.current_origins()   # loads in acc: x's dtype upcast
    picked: list[tuple[Any, Any]] = []   # each round's (value, position) buffers, over the rows

    def taken(ops, idx, rounds):
        """Whether idx's position along d was picked in an earlier round."""
        row, at = list(idx[:d]) + list(idx[d + 1:]), ops.index_expr(idx[d], torch.int64)
        hit = None
        for _, pos in rounds:
            h = ops.eq(at, pos.loader()(ops, row))
            hit = h if hit is None else ops.logical_or(hit, h)
        return hit

    for _ in range(k):
        rounds = tuple(picked)

        def remaining(ops, idx, rounds=rounds):
            v = value(ops, idx)
            return v if not rounds else ops.where(taken(ops, idx, rounds), ops.constant(lowest, acc), v)
        best = reduce(g, Pointwise(x.device, acc, tuple(x.size), remaining, origins), [d], False, "max", acc,
                      map_fn=lambda ops, v: v)
        top = best.loader()

        def first(ops, idx, rounds=rounds, top=top):
            v, m = value(ops, idx), top(ops, list(idx[:d]) + list(idx[d + 1:]))
            same = ops.eq(v, m)
            if acc.is_floating_point:   # NaN is the maximum: the first NaN not yet picked
                same = ops.logical_or(same, ops.logical_and(ops.isnan(v), ops.isnan(m)))
            if rounds:
                same = ops.logical_and(same, ops.logical_not(taken(ops, idx, rounds)))
            return ops.where(same, ops.index_expr(idx[d], torch.int64), ops.constant(n, torch.int64))
        pos = reduce(g, Pointwise(x.device, torch.int64, tuple(x.size), first, origins), [d], False, "min",
                     torch.int64, map_fn=lambda ops, v: v)
        picked.append((best, pos))

    def gathered(which: int, dtype: torch.dtype):
        loaders = [bufs[which].loader() for bufs in picked]

        def fn(ops, idx):
            row, j = list(idx[:d]) + list(idx[d + 1:]), ops.index_expr(idx[d], torch.int64)
            out = loaders[-1](ops, row)
            for r in range(k - 2, -1, -1):
                out = ops.where(ops.eq(j, ops.constant(r, torch.int64)), loaders[r](ops, row), out)
            return out   # in acc, x's dtype upcast: a loader's values are in its dtype upcast
        size = tuple(x.size[:d]) + (k,) + tuple(x.size[d + 1:])
        return Pointwise(x.device, dtype, size, fn, origins)

    return gathered(0, values_out.dtype), gathered(1, torch.int64)


@register(aten.nanmedian)
def _nanmedian(g, x, dim=None, keepdim=False):
    """The lower median of each row's numbers (of the whole tensor without dim) and its position:
    the row sorted (NaN last), its element of rank (c - 1) // 2 for the c numbers a sum counts;
    a row of NaN alone gives the element of rank (n - 1) // 2, a NaN, as eager does."""
    x, d, values, positions = median_rows(g, x, dim, False)
    n, value = int(x.size[d]), x.loader()
    loads = (values.loader(), positions.loader())
    if x.dtype.is_floating_point:
        numbers = reduce(g, Pointwise(x.device, torch.int64, tuple(x.size),
                                      lambda ops, idx: ops.to_dtype(ops.logical_not(ops.isnan(value(ops, idx))),
                                                                    torch.int64),
                                      origins_of(x)), [d], False, "sum", torch.int64, map_fn=lambda ops, v: v)
        count = numbers.loader()
    else:   # no NaN: every element is a number
        count = lambda ops, row: ops.constant(n, torch.int64)   # noqa: E731

    def picked(ops, which, row):
        c = count(ops, row[:d] + row[d + 1:])
        one, two = ops.constant(1, torch.int64), ops.constant(2, torch.int64)
        rank = ops.where(ops.gt(c, ops.constant(0, torch.int64)), ops.floordiv(ops.sub(c, one), two),
                         ops.constant((n - 1) // 2, torch.int64))
        row[d] = ops.indirect(rank, n)
        return loads[which](ops, row)
    out = at_ranks(x, d, keepdim, picked)
    return out[0] if dim is None else out


HISTC_MAX_WORK = 1 << 24   # bins x elements: beyond, ATen's one pass with atomics


@register(aten.histc)
def _histc(g, x, bins=100, min=0, max=0):
    """Counts of x's elements in `bins` equal bins over [min, max], as eager's kernel bins them:
    (v - min) * bins / (max - min) truncated, v == max in the last bin, values outside (and NaN)
    not counted; integers in integer arithmetic (module note)."""
    n = math.prod(x.size)
    acc = upcast(x.dtype)
    integral = not acc.is_floating_point
    lo, hi = (int(min), int(max)) if integral else (float(min), float(max))
    if x.dtype == torch.bool or not lo < hi or n == 0 or bins * n > HISTC_MAX_WORK:
        raise Unsupported("histc over the data's own range, of bools, or of too many bins x elements")
    flat, out_dtype = _flat_loader(x), g.out.dtype
    count = torch.int64 if integral else torch.float32
    counted = sorted_key_counts(g, g.node, int(bins), lo, hi)
    if counted is not None:   # keys a counting sort just grouped: its counts, not a second pass
        return Pointwise(x.device, out_dtype, (int(bins),),
                         lambda ops, idx: ops.to_dtype(counted(ops, idx), out_dtype), origins_of(x) | g.current_origins())

    def member(ops, idx):
        v = flat(ops, [idx[1]])   # in acc: x's dtype upcast
        c = lambda value: ops.constant(value, acc)   # noqa: E731
        inside = ops.logical_and(ops.ge(v, c(lo)), ops.le(v, c(hi)))
        scaled = ops.mul(ops.sub(v, c(lo)), c(bins))
        width = c(hi - lo)
        pos = ops.to_dtype(ops.floordiv(scaled, width) if integral else ops.div_rn(scaled, width), torch.int64)
        pos = ops.where(ops.eq(pos, ops.constant(bins, torch.int64)), ops.constant(bins - 1, torch.int64), pos)
        hit = ops.logical_and(inside, ops.eq(pos, ops.index_expr(idx[0], torch.int64)))
        return ops.to_dtype(hit, count)

    members = Pointwise(x.device, count, (int(bins), n), member, origins_of(x) | g.current_origins())
    buf = reduce(g, members, [1], False, "sum", count)
    return buf if buf.dtype == out_dtype else _finish(g, buf)


def _flat_loader(x):
    from ..ir.index import row_major_vars
    inner, size = x.loader(), list(x.size)
    return lambda ops, idx: inner(ops, row_major_vars(idx[0], size))


@register(aten.max, aten.min)
def _max_min(g, x, dim=None, keepdim=False):
    is_max = g.node.target.overloadpacket is aten.max
    if dim is None and not isinstance(g.out, (tuple, list)):    # x.max(): the value over every element
        return _extremum(g, x, None, False, "max" if is_max else "min")
    if not isinstance(dim, int) or not isinstance(g.out, (tuple, list)):
        raise Unsupported("max/min of two tensors")
    out_vals, out_idx = g.out
    d = norm_dim(dim, len(x.size))
    if x.dtype == torch.bool or (x.size and x.size[d] == 0):
        raise Unsupported("bool or empty max")
    rtype = "max" if is_max else "min"
    split = split_arg_reduction(g, x, d, keepdim, "arg" + rtype) if x.size else None
    if split:   # the values: the extremum of the chunks' extrema, beside the chunk's position
        idx, best = split
        vals = reduce(g, best, [d], keepdim, rtype, upcast(x.dtype), map_fn=lambda ops, v: v)
    else:
        vals = reduce(g, x, [d] if x.size else [], keepdim, rtype, upcast(x.dtype), map_fn=lambda ops, v: v)
        idx = reduce(g, x, [d] if x.size else [], keepdim, "arg" + rtype, upcast(x.dtype),
                     map_fn=lambda ops, v: v, out_dtype=torch.int64)
    if vals.dtype != out_vals.dtype:
        vals = g.realize(make_pointwise(g, [vals], lambda ops, a: a, upcast(out_vals.dtype), out=out_vals), out_vals)
    return (vals, idx)


@register(aten.any, aten.all)
def _any_all(g, x, dims=None, keepdim=False):
    rtype = "any" if g.node.target.overloadpacket is aten.any else "all"
    src = upcast(x.dtype)

    def to_bool(ops, v):
        return v if src == torch.bool else ops.ne(v, ops.constant(0, src))
    buf = reduce(g, x, _dims(x, dims), keepdim, rtype, torch.bool, map_fn=to_bool)
    return buf if buf.dtype == g.out.dtype else _finish(g, buf)


def _var(g, x, dims, correction, keepdim, out):
    """(var, mean, acc): var as `out` (keepdim or not), mean a keepdim-shaped Pointwise."""
    acc = upcast(x.dtype)
    if not acc.is_floating_point:
        raise Unsupported("integer var")
    d = _dims(x, dims)
    n = 1
    for k in d:
        n *= x.size[k]
    c = 1.0 if correction is None else float(correction)
    denom = max(n - c, 0.0)
    if n > 0 and g.heuristics.variance_in_one_pass(n, _reduces_innermost(g, tuple(int(v) for v in x.size), d)):
        return _var_shifted(g, x, d, n, denom, keepdim, out, acc)
    s = reduce(g, x, d, True, "sum", acc, map_fn=lambda ops, v: ops.to_dtype(v, acc))
    def mean_fn(ops, idx):
        m = ops.truediv(s.loader()(ops, idx), ops.constant(float(n), acc))
        if n == 1:
            return m
        # eager's Welford mean of a row holding an infinity is NaN (inf - inf in its update)
        return ops.where(ops.isinf(m), ops.constant(float("nan"), acc), m)

    mean = Pointwise(x.device, acc, s.size, mean_fn)
    xl, ml = x.loader(), mean.loader()
    keep_size = s.size

    def dev2(ops, idx):
        sub = [sympy.Integer(0) if keep_size[k] == 1 else idx[k] for k in range(len(idx))]
        diff = ops.sub(ops.to_dtype(xl(ops, idx), acc) if upcast(x.dtype) != acc else xl(ops, idx), ml(ops, sub))
        return ops.mul(diff, diff)

    sq = Pointwise(x.device, acc, tuple(x.size), dev2, origins_of(x))
    ssq = reduce(g, sq, d, keepdim, "sum", acc, map_fn=lambda ops, v: v)
    var = make_pointwise(g, [ssq], lambda ops, a: _over_count(ops, a, denom, acc, n), acc, out=out)
    return var, mean, acc


def _over_count(ops: Any, m2: Any, denom: float, acc: torch.dtype, n: int) -> Any:
    """m2 / denom, the sum of squared deviations over the corrected count. A count of 0 is eager's
    m2 / 0 written out: NaN for one element, else inf where m2 > 0 and NaN where it is 0. As a
    division the value rests on m2 being exactly 0, and the GPU compile contracts the deviation
    x * r - (x * r) * 1 into an FMA whose result is the product's rounding error: on an H100 a
    one-element variance read +inf where eager reads NaN."""
    if denom == 0 and n == 1:
        return ops.constant(float("nan"), acc)   # (x - x)^2 / 0, whatever x
    if denom == 0:
        return ops.where(ops.gt(m2, ops.constant(0.0, acc)), ops.constant(float("inf"), acc),
                         ops.constant(float("nan"), acc))
    return ops.truediv(m2, ops.constant(denom, acc))


def _var_shifted(g, x, d, n, denom, keepdim, out, acc):
    """One pass over x (Heuristics.variance "shifted"): with K the row's first element, the sums of
    x - K and of (x - K)^2 are sibling reductions of one r loop, and var = (S2 - S1^2/n) / denom,
    mean = K + S1/n. Shifting by a sample of the row keeps the cancellation of S2 - S1^2/n to the
    order of var itself (the naive sum of squares loses it when |mean| >> std); it is how a looped
    norm reads its rows once instead of twice, as a Welford reduction does."""
    xl = x.loader()
    rank = len(x.size)
    # K from a buffer computed by a pointwise kernel is computed again from that kernel's body: a
    # read of the buffer at the row's first element would keep its producer out of this kernel
    # (an affine prologue before a looped layer norm ran as a kernel of its own). Any K works as
    # long as every use takes the same one.
    body = x.body.inner_fn if isinstance(x, ComputedBuffer) and isinstance(x.body, PointwiseBody) \
        and tuple(x.body.size) == tuple(x.size) else None

    def first(ops, idx):  # K at the row of idx (its reduced coordinates 0)
        at = [sympy.Integer(0) if k in d else idx[k] for k in range(rank)]
        if body is not None:
            return ops.to_dtype(body(ops, at), acc)
        v = xl(ops, at)
        return ops.to_dtype(v, acc) if upcast(x.dtype) != acc else v

    def shifted(ops, idx):
        v = xl(ops, idx)
        v = ops.to_dtype(v, acc) if upcast(x.dtype) != acc else v
        return ops.sub(v, first(ops, idx))

    dev = Pointwise(x.device, acc, tuple(x.size), shifted, origins_of(x))
    s1 = reduce(g, dev, d, True, "sum", acc, map_fn=lambda ops, v: v)
    s2 = reduce(g, dev, d, True, "sum", acc, map_fn=lambda ops, v: ops.mul(v, v))
    l1, l2 = s1.loader(), s2.loader()
    keep = tuple(s1.size)

    def mean_fn(ops, idx):
        return ops.add(first(ops, idx), ops.truediv(l1(ops, idx), ops.constant(float(n), acc)))

    def var_fn(ops, idx):
        a = l1(ops, idx)
        m2 = ops.sub(l2(ops, idx), ops.mul(a, ops.truediv(a, ops.constant(float(n), acc))))
        m2 = ops.where(ops.lt(m2, ops.constant(0.0, acc)), ops.constant(0.0, acc), m2)  # rounding below 0
        return _over_count(ops, m2, denom, acc, n)

    mean = Pointwise(x.device, acc, keep, mean_fn, origins_of(x))
    var_keep = Pointwise(x.device, acc, keep, var_fn, origins_of(x))
    out_cd = upcast(out.dtype)
    vl = var_keep.loader() if keepdim else _unkeep(var_keep, rank, d)
    return (Pointwise(out.device, out.dtype, tuple(int(s) for s in out.shape),
                      lambda ops, idx: vl(ops, idx) if out_cd == acc else ops.to_dtype(vl(ops, idx), out_cd),
                      origins_of(x)), mean, acc)


def _unkeep(v: Any, rank: int, d: Sequence[int]) -> Callable[..., Any]:
    """A loader of keepdim-shaped v at an index without the reduced dims."""
    inner = v.loader()
    kept = [k for k in range(rank) if k not in d]

    def load(ops, idx):
        full = [sympy.Integer(0)] * rank
        for pos, k in enumerate(kept):
            full[k] = idx[pos]
        return inner(ops, full)
    return load


@register(aten.var)
def _var_lower(g, x, dims=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool):
        correction = 1 if unbiased else 0
    elif unbiased is not None and not isinstance(unbiased, bool):
        raise Unsupported("var signature")
    return _var(g, x, dims, correction, keepdim, g.out)[0]


@register(aten.var_mean)
def _var_mean(g, x, dims=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool):
        correction = 1 if unbiased else 0
    out_var, out_mean = g.out
    var, mean_keep, acc = _var(g, x, dims, correction, keepdim, out_var)
    d = _dims(x, dims)
    if keepdim:
        sq = mean_keep
    else:
        keep = tuple(x.size[k] for k in range(len(x.size)) if k not in d)
        sq = Pointwise(x.device, acc, keep, _unkeep(mean_keep, len(x.size), d))
    mean = make_pointwise(g, [sq], lambda ops, a: a, acc, out=out_mean)
    origins = g.current_origins()
    return (g.realize(var.with_origins(origins), out_var), g.realize(mean.with_origins(origins), out_mean))


@register(aten.logsumexp)
def _logsumexp(g, x, dims, keepdim=False):
    acc = upcast(g.out.dtype)
    if not acc.is_floating_point:
        raise Unsupported("integer logsumexp")
    d = _dims(x, dims)
    m = reduce(g, x, d, True, "max", acc, map_fn=lambda ops, v: ops.to_dtype(v, acc) if upcast(x.dtype) != acc else v)
    xl, ml = x.loader(), m.loader()
    msize = m.size

    def safe_m(ops, idx):
        v = ml(ops, idx)
        # an all -inf (or inf) row: subtracting inf would give nan; eager's logsumexp uses 0 then
        return ops.where(ops.isinf(v), ops.constant(0.0, acc), v)

    def shifted(ops, idx):
        sub = [sympy.Integer(0) if msize[k] == 1 else idx[k] for k in range(len(idx))]
        v = xl(ops, idx)
        v = ops.to_dtype(v, acc) if upcast(x.dtype) != acc else v
        return ops.exp(ops.sub(v, safe_m(ops, sub)))

    e = Pointwise(x.device, acc, tuple(x.size), shifted, origins_of(x))
    s = reduce(g, e, d, keepdim, "sum", acc, map_fn=lambda ops, v: v)
    kept = [k for k in range(len(x.size)) if k not in d]
    sl = s.loader()

    def final(ops, idx):
        if keepdim:
            midx = idx
        else:
            midx = [sympy.Integer(0)] * len(x.size)
            for pos, k in enumerate(kept):
                midx[k] = idx[pos]
        return ops.add(ops.log(sl(ops, idx)), safe_m(ops, midx))

    out_cd = upcast(g.out.dtype)  # bound now: the body runs after lowering has moved on
    return Pointwise(x.device, g.out.dtype, tuple(g.out.shape),
                     lambda ops, idx: final(ops, idx) if acc == out_cd else ops.to_dtype(final(ops, idx), out_cd))
