"""sort of integer keys known to lie in a small range: a counting sort.

Note: a mixture of experts groups its tokens by expert: it sorts the flat list of the experts each
token was routed to (`torch.sort(topk_indices.view(-1))`), keys that the graph itself bounds to
[0, experts) as positions along topk's row. ATen sorts them with a radix sort, a host call and
33 µs a layer for 4096 keys on an H100 (Mixtral's forward, under either compiler:
`benchmarks/results/2026-12-05-h100-mixtral/`). With R possible keys and S keys, a
counting sort is a scan over R rows of S (each row counting one key's occurrences up to each
position), a scan over the R counts, and one store per key at its rank: the keys before it, plus
the keys equal to it before it. The result is stable, which eager's unstable sort may also be. The running counts are int32 and
at most SORT_MAX_WORK of them are stored: beyond, ATen's sort moves fewer bytes.
Only keys whose range the graph proves (topk's positions, through views) are sorted so; any other
sort stays ATen's. What it computes on the way (each key's count, each key's rank) is recorded
for the ops that follow (lower/sorted_keys.py).
"""
from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
import torch.fx

from ..ir.values import ComputedBuffer, Layout, ScanBody
from .common import norm_dim, origins_of
from .registry import Unsupported, register
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
        raise Unsupported("sort of keys without a known small range, of several rows, or descending")
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
