"""Scan codegen: a scan node's value in a persistent or looped kernel, through tl.associative_scan.

Note: a persistent kernel scans each row's [XBLOCK, RBLOCK] block in one tl.associative_scan. A
looped kernel scans each RBLOCK chunk on its own and combines it with a carry, the prefix of the
chunks before it in scan order (a reverse scan's loop walks the chunks from the last, see
`reverse_loop`); the carry then becomes the result's last lane in scan order. Lanes outside the
row hold the combine's identity, so the padding a reverse scan meets first adds nothing. Values
are combined in the scan's accumulation dtype (f32 for half inputs, int64 for integers).

cummax's and cummin's indices ("argmax", "argmin") scan (value, position) pairs: the later element
wins a tie and a NaN wins over any number, as in eager; such a scan's carry is a pair.

A row sort (`ir.values.SORTS`) sorts each row's block with a bitonic network (`SORT_HELPERS`), so
it runs persistent only (plan/apply.py rejects other configs). Each element becomes one int64: an int32 key whose signed
order is the element's (a float's bits with the magnitude bits flipped when negative; NaN made
the one positive NaN, so it comes last as in eager; -0.0 made +0.0, equal as in eager), negated
for a descending sort, above its position. Sorting those orders by value, ties by position (a
stable sort, which eager's `stable=True` asks for and its default permits), and gives both the
values and their positions; lanes past the row's end hold the largest int64 and sort last. A sort
read only for its values sorts the keys alone (int32). 64-bit values (int64, f64: its bits ordered
as above, in int64) have no room for a position: keys and positions go through the network side by
side (`_sort_rows_by`), ties ordered by position.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch

from ..ir.values import SORTS
from .printer import tl_dtype

COMBINE_FNS = {"sum": "_sum_combine", "prod": "_prod_combine", "logaddexp": "_logaddexp_combine",
               "max": "_max_combine", "min": "_min_combine"}
INDEX_COMBINE_FNS = {"argmax": "_cummax_index_combine", "argmin": "_cummin_index_combine"}
# what tl.associative_scan is given for a sum or product: Triton's own combine functions (the same
# `a + b`, `a * b`), which Triton's interpreter scans with numpy; it calls any other one per element
SCAN_FNS = {"sum": "_fast_sum", "prod": "_fast_prod"}

# jit helpers a scan kernel needs beyond the prelude (only scan kernels carry them, so every other
# kernel's source, and the measurements keyed by it, stay as they are)
SCAN_HELPERS = '''
_fast_prod = tl.standard._prod_combine

@triton.jit
def _logaddexp_combine(a, b):
    # log(exp(a) + exp(b)); equal infinities give themselves, a NaN gives NaN
    m = tl.maximum(a, b)
    d = tl.where(a == b, 0.0, tl.abs(a - b))
    return m + _log1p(tl.exp(-d))


@triton.jit
def _cummax_index_combine(av, ai, bv, bi):
    # b comes later: it wins a tie, and a NaN wins over everything
    take = (bv != bv) | ((av == av) & (bv >= av))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


@triton.jit
def _cummin_index_combine(av, ai, bv, bi):
    take = (bv != bv) | ((av == av) & (bv <= av))
    return tl.where(take, bv, av), tl.where(take, bi, ai)
'''


# the block's log2s (LOG_R along a row, N over the block), written into each network where it starts:
# a jit function's result is not a constexpr in Triton 3.6, so no helper can return them
_BLOCK_LOG2 = (
    "    LOG_R: tl.constexpr = " + " + ".join(f"(RBLOCK > {1 << j})" for j in range(10)) + "\n"
    "    N: tl.constexpr = LOG_R + " + " + ".join(f"(ROWS > {1 << j})" for j in range(11)) + "\n")

# a kernel with a row sort carries these too: a bitonic sort of each row of a [ROWS, RBLOCK] block
# (Triton's own tl.sort is a jit function that Triton's interpreter cannot call from a kernel). The
# block is viewed as a hypercube of 2s, one axis per bit of an element's place in it (the last axis
# its lowest position bit): an element's partner across bit j of its position is its neighbour
# along that one axis, the pair's sum less itself, with no reshape or layout change between steps
SORT_HELPERS = '''

@triton.jit
def _bit_of(n: tl.constexpr, axis: tl.constexpr):
    # 0 or 1 along `axis` of an n-dimensional hypercube: the bit that axis stands for
    return tl.reshape(tl.arange(0, 2), [1] * axis + [2] + [1] * (n - axis - 1))


@triton.jit
def _takes_larger(N: tl.constexpr, LOG_R: tl.constexpr, i: tl.constexpr, k: tl.constexpr):
    # at step k of merge i (pairs across position bit i - k): 1 where a lane keeps the pair's larger
    # element, the upper lane of an ascending run (bit i + 1 of its position clear)
    right = _bit_of(N, N - 1 - i + k)
    if i + 1 < LOG_R:
        right = right ^ _bit_of(N, N - 2 - i)
    return right


@triton.jit
def _sort_rows(x, ROWS: tl.constexpr, RBLOCK: tl.constexpr):
    # each row of x ascending (ROWS and RBLOCK powers of two, RBLOCK at most 2^10): bitonic merges
    # of growing runs, a run descending where the next bit of its position is set
    #LOG2
    if LOG_R > 0:
        h = tl.reshape(x, [2] * N)
        for i in tl.static_range(LOG_R):
            for k in tl.static_range(i + 1):
                # the axis of bit i - k: N - 1 - (i - k)
                partner = tl.reduce(h, N - 1 - i + k, _fast_sum, keep_dims=True) - h   # wraps: exact
                h = tl.where((h > partner) != (_takes_larger(N, LOG_R, i, k) == 1), partner, h)
        x = tl.reshape(h, [ROWS, RBLOCK])
    return x


@triton.jit
def _sort_rows_by(x, p, ROWS: tl.constexpr, RBLOCK: tl.constexpr):
    # _sort_rows of keys x that may tie, ties ordered by p (distinct in a row): (x, p) sorted
    #LOG2
    if LOG_R > 0:
        h = tl.reshape(x, [2] * N)
        q = tl.reshape(p, [2] * N)
        for i in tl.static_range(LOG_R):
            for k in tl.static_range(i + 1):
                partner = tl.reduce(h, N - 1 - i + k, _fast_sum, keep_dims=True) - h
                partner_q = tl.reduce(q, N - 1 - i + k, _fast_sum, keep_dims=True) - q
                take = ((h > partner) | ((h == partner) & (q > partner_q))) != (_takes_larger(N, LOG_R, i, k) == 1)
                h = tl.where(take, partner, h)
                q = tl.where(take, partner_q, q)
        x = tl.reshape(h, [ROWS, RBLOCK])
        p = tl.reshape(q, [ROWS, RBLOCK])
    return x, p
'''.replace("    #LOG2\n", _BLOCK_LOG2)


def is_scan_kernel(members: Sequence[tuple[Any, Any]]) -> bool:
    return any(n.kind == "scan" for n, _ in members)


def has_row_sort(nodes: Iterable[Any]) -> bool:
    """Does one of these scheduler nodes sort rows (a ScanBody of SORTS)?"""
    return any(n.kind == "scan" and n.buffer.body.combine in SORTS for n in nodes)


def is_sort_kernel(members: Sequence[tuple[Any, Any]]) -> bool:
    return has_row_sort(n for n, _ in members)


def identity(combine: str, dtype: torch.dtype) -> str:
    """The combine's identity as Triton source: a lane holding it leaves every prefix unchanged."""
    if combine == "sum":
        return "0.0" if dtype.is_floating_point else "0"
    if combine == "prod":
        return "1.0" if dtype.is_floating_point else "1"
    low = combine in ("max", "logaddexp", "argmax")
    if dtype.is_floating_point:
        return 'float("-inf")' if low else 'float("inf")'
    info = torch.iinfo(dtype)
    return str(info.min if low else info.max)


def carry_name(node: Any) -> str:
    return f"carry_{node.name}"


def carry_init(node: Any) -> str:
    """The line that starts a looped scan's carry at the identity, before the r loop (an index
    scan's carry: the identity's value and position 0)."""
    body = node.buffer.body
    line = (f"{carry_name(node)} = tl.full([XBLOCK, 1], {identity(body.combine, body.acc_dtype)}, "
            f"{tl_dtype(body.acc_dtype)})")
    if body.combine in INDEX_COMBINE_FNS:
        line += f"; {carry_name(node)}_i = tl.full([XBLOCK, 1], 0, tl.int64)"
    return line


def _last_lane(r: str, lane: str) -> str:
    """A [XBLOCK, 1] column of `r`'s values at `lane`."""
    return f"tl.reduce(tl.where(tl.arange(0, RBLOCK)[None, :] == {lane}, {r}, 0), 1, _fast_sum)[:, None]"


def reverse_loop(members: Sequence[tuple[Any, Any]]) -> bool:
    """Does the kernel's r loop walk its chunks from the last (its scans run in reverse)?"""
    return any(n.kind == "scan" and n.buffer.body.reverse for n, _ in members)


def scan_value(w: Any, node: Any) -> Any:
    """Emit node's scan into the KernelWriter `w` (its current node is `node`); the [XBLOCK, RBLOCK]
    value of the scan at this block's r positions."""
    body = node.buffer.body
    acc = body.acc_dtype
    v = w.to_dtype(node.run_body(w), acc)
    if body.combine in SORTS:
        return _sort_value(w, body, v)
    v = w.cse(f"tl.where(xrmask, tl.broadcast_to({v}, [XBLOCK, RBLOCK]), {identity(body.combine, acc)})", acc)
    if body.combine in INDEX_COMBINE_FNS:
        return _index_scan_value(w, node, v)
    fn = COMBINE_FNS[body.combine]
    scan_fn = SCAN_FNS.get(body.combine, fn)
    s = w.cse(f"tl.associative_scan({v}, 1, {scan_fn}{', reverse=True' if body.reverse else ''})", acc)
    if w.persistent:
        return s
    carry = carry_name(node)
    r = w.cse(f"{fn}({carry}, {s})", acc)
    lane = "0" if body.reverse else "RBLOCK - 1"
    w.emit(f"{carry} = {_last_lane(r, lane)}")
    return r


def _index_scan_value(w: Any, node: Any, v: Any) -> Any:
    """The positions an index scan picks: (value, position) pairs scanned together (never in reverse)."""
    body = node.buffer.body
    fn = INDEX_COMBINE_FNS[body.combine]
    pos = w.cse("tl.broadcast_to(rindex.to(tl.int64), [XBLOCK, RBLOCK])", torch.int64)
    values, picked = w.fresh(body.acc_dtype), w.fresh(torch.int64)
    w.emit(f"{values}, {picked} = tl.associative_scan(({v}, {pos}), 1, {fn})")
    if w.persistent:
        return picked
    carry = carry_name(node)
    rv, ri = w.fresh(body.acc_dtype), w.fresh(torch.int64)
    w.emit(f"{rv}, {ri} = {fn}({carry}, {carry}_i, {values}, {picked})")
    w.emit(f"{carry} = {_last_lane(rv, 'RBLOCK - 1')}")
    w.emit(f"{carry}_i = {_last_lane(ri, 'RBLOCK - 1')}")
    return ri


def _positions_beside(w: Any, descending: bool) -> bool:
    """Does the kernel also sort rows for their positions in this direction? Its values then come
    from that one sort (of keys with positions), not from a second."""
    return any(n.kind == "scan" and SORTS.get(n.buffer.body.combine) == (descending, True) for n, _ in w.members)


def _sort_value(w: Any, body: Any, v: Any) -> Any:
    """A row sort's values (in body.acc_dtype) or positions (int64) at this block's r positions."""
    if not w.persistent:
        raise ValueError("a row sort needs its whole row in one block (a persistent config)")
    descending, positions = SORTS[body.combine]
    i32, i64 = torch.int32, torch.int64
    acc = body.acc_dtype
    wide = acc in (torch.int64, torch.float64)   # 64-bit keys: positions sort beside them (_sort_rows_by)
    kt, bits_of, top = (i64, "tl.int64", 63) if wide else (i32, "tl.int32", 31)
    big = "0x7FFFFFFFFFFFFFFF" if wide else "0x7FFFFFFF"
    floating = acc.is_floating_point
    if floating:
        same = w.cse(f"tl.where({v} != {v}, float('nan'), {v} + 0.0)", acc)
        bits = w.cse(f"{same}.to({bits_of}, bitcast=True)", kt)
        key = w.cse(f"{bits} ^ (({bits} >> {top}) & {big})", kt)
    else:
        key = v
    if descending:
        key = w.cse(f"~{key}", kt)
    with_positions = positions or _positions_beside(w, descending)
    if wide and with_positions:
        if str(key) not in w.sorted_by:   # one sort for the values and positions nodes
            # positions ride as 32-bit (< RBLOCK): each merge step moves and compares half as many
            # of their words as 64-bit positions would, beside the 64-bit keys
            keys, ranks = w.fresh(i64), w.fresh(i32)
            w.emit(f"{keys}, {ranks} = _sort_rows_by(tl.where(xrmask, {key}, {big}), "
                   f"tl.where(xrmask, rindex, RBLOCK), XBLOCK, RBLOCK)")
            w.sorted_by[str(key)] = (keys, ranks)
        keys, ranks = w.sorted_by[str(key)]
        if positions:
            return w.cse(f"{ranks}.to(tl.int64)", i64)
        got = keys
    elif with_positions:
        packed = w.cse(f"tl.where(xrmask, ({key}.to(tl.int64) << 32) | rindex.to(tl.int64), 0x7FFFFFFFFFFFFFFF)", i64)
        ordered = w.cse(f"_sort_rows({packed}, XBLOCK, RBLOCK)", i64)
        if positions:
            return w.cse(f"{ordered} & 0x7FFFFFFF", i64)   # positions < 2^31 (a row fits a block)
        got = w.cse(f"({ordered} >> 32).to(tl.int32)", i32)
    else:   # the values alone: equal keys are equal values, so the keys sort alone (32-bit ones half as wide)
        got = w.cse(f"_sort_rows(tl.where(xrmask, {key}, {big}), XBLOCK, RBLOCK)", kt)
    if descending:
        got = w.cse(f"~{got}", kt)
    if not floating:
        return got
    back = w.cse(f"{got} ^ (({got} >> {top}) & {big})", kt)
    return w.cse(f"{back}.to({'tl.float64' if wide else 'tl.float32'}, bitcast=True)", acc)
