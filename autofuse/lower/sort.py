"""sort, and the selections made from it (median, kthvalue): rows of at most SORT_ROW_MAX elements
sorted whole in one block each, and 1-D integer keys known to lie in a small range counted.

Note: a row of up to 1024 elements fits one program's block, which a bitonic sort orders in
registers (codegen/scan.py): the sort reads and writes each element once, fused with what
produces its input and what reads its output, where ATen's segmented sort runs several passes
(a 32768 x 1021 f32 sort: 1.08 ms under both compilers, 6% of the H200's copy bandwidth,
`benchmarks/results/2026-12-03-h200-corpus-all-programs/`). median and kthvalue of such rows read
one element of each sorted row. 64-bit values sort with their positions beside them (two
tensors through the network); longer rows stay ATen's.

A mixture of experts groups its tokens by expert: it sorts the flat list of the experts each
token was routed to (`torch.sort(topk_indices.view(-1))`), keys that the graph itself bounds to
[0, experts) as positions along topk's row. ATen sorts them with a radix sort, a host call and
33 µs a layer for 4096 keys on an H100 (Mixtral's forward, under either compiler:
`benchmarks/results/2026-12-05-h100-mixtral/`). With R possible keys and S keys, a
counting sort is a scan over R rows of S (each row counting one key's occurrences up to each
position), a scan over the R counts, and one store per key at its rank: the keys before it, plus
the keys equal to it before it. The result is stable, which eager's unstable sort may also be. The running counts are int32 and
at most SORT_MAX_WORK of them are stored: beyond, ATen's sort moves fewer bytes.
Only keys whose range the graph proves (topk's positions, through views) are sorted so. What it
computes on the way (each key's count, each key's rank) is recorded for the ops that follow
(lower/sorted_keys.py).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import sympy
import torch
import torch.fx

from ..ir.index import row_major_vars
from ..ir.values import ComputedBuffer, Layout, Pointwise, ScanBody
from .common import norm_dim, origins_of
from .registry import Unsupported, register
from .scans import scan
from .scatter import scatter_into
from .sorted_keys import VIEWS, CountingSort, record

aten = torch.ops.aten

SORT_MAX_WORK = 1 << 20   # key range x keys: the running counts stored (4 MB of int32 at most)


def key_range(g: Any, node: torch.fx.Node) -> int | None:
    """R when the node's input is topk's positions along rows of R (through views): keys in [0, R)."""
    src = node.args[0]
    while isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target in VIEWS:
        src = src.args[0]
    if not (isinstance(src, torch.fx.Node) and src.target is operator.getitem and src.args[1] == 1):
        return None
    topk = src.args[0]
    if not (isinstance(topk, torch.fx.Node) and topk.target is aten.topk.default):
        return None
    values = g.fake_env.get(topk.args[0])
    dim = topk.args[2] if len(topk.args) > 2 else topk.kwargs.get("dim", -1)
    return int(values.shape[norm_dim(dim, values.dim())]) if values is not None and values.dim() else None


@register(aten.sort)
def _sort(g, x, *args, **kwargs):
    dim = args[0] if args else kwargs.get("dim", -1)
    descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    r = key_range(g, g.node)
    if len(x.size) != 1 or descending or r is None or norm_dim(dim, 1) != 0 or r * x.size[0] > SORT_MAX_WORK:
        return row_sort(g, x, dim, descending)
    return _counting_sort(g, x, r)


# rows a block sorts whole (the scans' persistent limit, heuristics.scan_persistent_max)
SORT_ROW_MAX = 1024
SORTABLE = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int16, torch.int8, torch.uint8,
            torch.int64, torch.float64)


def row_sort(g: Any, x: Any, dim: int, descending: bool, outs: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """(values, positions) of each row along dim sorted in one block (codegen/scan.py): stable,
    NaN last ascending and first descending, as eager's sort; rows of at most SORT_ROW_MAX
    elements of any dtype but bool, else ATen's sort. `outs`: the fake
    (values, positions) to store them as, g.out by default."""
    if not x.size or x.dtype not in SORTABLE or x.size[norm_dim(dim, len(x.size))] > SORT_ROW_MAX:
        raise Unsupported("sort of a scalar, of bool values, or of rows longer than a block")
    acc = x.dtype if x.dtype in (torch.int64, torch.float64) else \
        torch.float32 if x.dtype.is_floating_point else torch.int32
    if x.dtype in (torch.float16, torch.bfloat16):   # ordered as stored: rounded to its dtype first
        load, half = x.loader(), x.dtype
        x = Pointwise(x.device, half, tuple(x.size),
                      lambda ops, idx: ops.to_dtype(ops.to_dtype(load(ops, idx), half), acc), origins_of(x))
    suffix = "_descending" if descending else ""
    values_out, indices_out = outs or g.out
    saved = g.out
    try:
        g.out = values_out
        values = scan(g, x, dim, "sort" + suffix, acc)
        g.out = indices_out
        return values, scan(g, x, dim, "argsort" + suffix, acc)
    finally:
        g.out = saved


def sorted_rows(g: Any, x: Any, d: int, descending: bool) -> tuple[Any, Any]:
    """row_sort of x along d, into buffers of x's shape (a selection's own outputs are smaller)."""
    size = tuple(int(s) for s in x.size)
    outs = (torch.empty(size, dtype=x.dtype, device="meta"), torch.empty(size, dtype=torch.int64, device="meta"))
    return row_sort(g, x, d, descending, outs)


def at_ranks(x: Any, d: int, keepdim: bool, picked: Callable[..., tuple[Any, Any]]) -> tuple[Pointwise, Pointwise]:
    """(values, positions) of one element per row along d; picked(ops, which, row index) loads
    that element's value (which 0) or position (which 1) from the sorted rows."""
    size = tuple(x.size[:d]) + ((1,) if keepdim else ()) + tuple(x.size[d + 1:])

    def at(which: int, dtype: torch.dtype) -> Pointwise:
        def fn(ops, idx):
            row = list(idx[:d]) + [sympy.Integer(0)] + list(idx[d + 1 if keepdim else d:])
            return picked(ops, which, row)
        return Pointwise(x.device, dtype, size, fn, origins_of(x))

    return at(0, x.dtype), at(1, torch.int64)


def median_rows(g: Any, x: Any, dim: int | None, descending: bool) -> tuple[Any, int, Any, Any]:
    """(x, d, values, positions): x as rows along dim (the whole tensor as one row where dim is
    None, as median() and nanmedian() take it), that dim, and the rows sorted."""
    if dim is None:
        load, size = x.loader(), [int(s) for s in x.size]
        x, dim = Pointwise(x.device, x.dtype, (math.prod(size),),
                           lambda ops, idx: load(ops, row_major_vars(idx[0], size)), origins_of(x)), 0
    elif not x.size:
        raise Unsupported("a median of a scalar")
    d = norm_dim(dim, len(x.size))
    return (x, d, *sorted_rows(g, x, d, descending))


def sorted_first(g: Any, x: Any, d: int, k: int, descending: bool) -> tuple[Pointwise, Pointwise]:
    """(values, positions) of the first k elements of each row along d sorted (topk's)."""
    values, positions = sorted_rows(g, x, d, descending)
    size = tuple(x.size[:d]) + (k,) + tuple(x.size[d + 1:])
    return (Pointwise(x.device, x.dtype, size, values.loader(), origins_of(x)),
            Pointwise(x.device, torch.int64, size, positions.loader(), origins_of(x)))


@register(aten.kthvalue)
def _kthvalue(g, x, k, dim=-1, keepdim=False):
    """The k-th smallest element of each row and its position: the row sorted, its element k - 1
    (NaN sorts last, as eager's kthvalue takes it)."""
    d = norm_dim(dim, max(len(x.size), 1))
    if not x.size or not 1 <= int(k) <= x.size[d]:
        raise Unsupported("kthvalue of a scalar, or k outside the row (ATen's error)")
    values, positions = sorted_rows(g, x, d, False)
    loads = (values.loader(), positions.loader())

    def picked(ops, which, row):
        row[d] = sympy.Integer(int(k) - 1)
        return loads[which](ops, row)
    return at_ranks(x, d, keepdim, picked)


@register(aten.median)
def _median(g, x, dim=None, keepdim=False):
    """The lower median of each row (of the whole tensor without dim) and its position, from the
    row sorted descending: NaN when the row holds one (its first NaN, which a stable descending
    sort puts first), else the element of rank (n - 1) // 2 from the bottom."""
    x, d, values, positions = median_rows(g, x, dim, True)
    n = int(x.size[d])
    loads = (values.loader(), positions.loader())

    def picked(ops, which, row):
        top, mid = list(row), list(row)
        top[d], mid[d] = sympy.Integer(0), sympy.Integer(n - 1 - (n - 1) // 2)
        if not x.dtype.is_floating_point:
            return loads[which](ops, mid)
        first = loads[0](ops, top)
        return ops.where(ops.isnan(first), loads[which](ops, top), loads[which](ops, mid))
    out_values, out_positions = at_ranks(x, d, keepdim, picked)
    return out_values if dim is None else (out_values, out_positions)


def _counting_sort(g: Any, x: Any, r: int) -> tuple[Any, Any]:
    """(values, positions) of 1-D keys in [0, r) by counting (module note)."""
    s = int(x.size[0])
    keys, origins = x.loader(), origins_of(x) | g.current_origins()
    i64, i32 = torch.int64, torch.int32   # keys and positions; counts (at most s)

    def key(ops, i):
        v = keys(ops, [i])
        return v if x.dtype == i64 else ops.to_dtype(v, i64)

    def is_key(ops, idx):   # [R, S]: whether key i is r
        return ops.to_dtype(ops.eq(key(ops, idx[1]), ops.index_expr(idx[0], i64)), i32)

    running = g.add_computed(ComputedBuffer(g.new_name(), Layout.contiguous(x.device, i32, (r, s)),
                                            ScanBody((r, s), 1, "sum", is_key, i32), origins))
    seen = running.loader()

    def count(ops, idx):   # [R]: occurrences of key r
        return seen(ops, [idx[0], sympy.Integer(s - 1)])

    upto = g.add_computed(ComputedBuffer(g.new_name(), Layout.contiguous(x.device, i32, (r,)),
                                         ScanBody((r,), 0, "sum", count, i32), origins))
    through = upto.loader()

    def rank_of(ops, idx):   # [S]: where key i lands, an int32 value
        k = ops.indirect(key(ops, idx[0]), r)
        before = ops.sub(through(ops, [k]), seen(ops, [k, sympy.Integer(s - 1)]))
        return ops.add(before, ops.sub(seen(ops, [k, idx[0]]), ops.constant(1, i32)))

    def rank(ops, idx):
        return [ops.indirect(rank_of(ops, idx), s)]

    values_out, indices_out = g.out
    saved = g.out
    try:
        g.out = values_out
        values = scatter_into(g, None, (s,), rank, lambda dtype: (lambda ops, idx: ops.to_dtype(key(ops, idx[0]), dtype)),
                              x, running, upto, reduce=None)
        g.out = indices_out
        positions = scatter_into(g, None, (s,), rank, lambda dtype: (lambda ops, idx: ops.index_expr(idx[0], dtype)),
                                 x, running, upto, reduce=None)
    finally:
        g.out = saved
    record(g, CountingSort(values.name, positions.name, running, rank_of))
    return values, positions
