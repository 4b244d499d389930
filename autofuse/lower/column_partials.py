"""Column sums beside row reductions over the same rows: partials per program, then their sum.

Note: a norm's backward reduces the same [rows, cols] values two ways: along each row (the input's
gradient) and down each column (the weight's and bias's gradients). Run apart, the column sum
reads every row again (a layer norm's training step over 8192 rows of 4096 f32: 68 µs of a 229 µs
step on the H200). Inductor's mix-order reduction sums the columns inside the row kernel: each
program walks a share of the rows, keeps a running sum per column, and stores it as one row of
partials; a small second reduction adds the programs' rows. Here the column sum `sum(f(n, c))`
becomes two buffers: the partials [programs, cols] (a `ColumnPartialBody`: program p sums rows
[p * rows_per, (p + 1) * rows_per)), which fusion may place in the row kernel
(schedule/loops.py, placement "col"; codegen/columns.py), and the sum of their rows, under the
column sum's own name. Only where a row reduction over the same (rows, cols) reads a buffer the
column sum reads: elsewhere the column sum stays one (split) reduction. The programs are about
`column_partial_programs_per_sm` per SM, for rows_per dividing the rows exactly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import sympy
import torch

from ..codegen.device import device_facts
from ..ir.index import make_vars, prod, row_major_vars
from ..ir.ops import analyze
from ..ir.values import ColumnPartialBody, ComputedBuffer, Layout, ReductionBody

if TYPE_CHECKING:
    from .graph import GraphLowering


def split_column_sums(g: "GraphLowering") -> None:
    """Replace each column sum that has a row reduction partner by its partials and their sum."""
    h = g.heuristics
    if not h.column_partials:
        return
    reductions = [b for b in g.buffers if isinstance(b, ComputedBuffer) and type(b.body) is ReductionBody]
    rows_of: dict[tuple[int, int], list[frozenset[str]]] = {}   # (rows, cols) -> what each row reduction reads along its rows
    for b in reductions:
        rows_of.setdefault((prod(b.body.size), prod(b.body.rsize)), []).append(_contiguous(b.body, along_r=True))
    # column statistics (a column max, a column mean): a column sum that reads one is a softmax or
    # a normalization down the columns, not a norm's weight gradient
    columns = {b.name for b in reductions if _contiguous(b.body, along_r=False)}
    out: list = []
    for b in g.buffers:
        parts = _split(g, b, rows_of, columns) if b in reductions else None
        out.extend(parts if parts is not None else [b])
    g.buffers = out


def _contiguous(body: ReductionBody, along_r: bool) -> frozenset[str]:
    """Buffers the reduction reads contiguously along its innermost r variable (a row reduction's
    rows) or, `along_r` False, along its innermost kept variable but not along r (a column sum)."""
    xs, rs = make_vars("i", len(body.size)), make_vars("r", len(body.rsize))
    info = analyze(lambda ops: body.inner_fn(ops, xs, rs))
    kept = [v for v, n in zip(xs, body.size) if n != 1]
    out = set()
    for name, index in info.loads:
        index = sympy.expand(index)
        r_step = index.coeff(rs[-1]) if rs else 0
        x_step = index.coeff(kept[-1]) if kept else 0
        if (r_step == 1) if along_r else (x_step == 1 and r_step != 0):
            out.add(name)
    return frozenset(out)


def _loads(body: ReductionBody) -> frozenset[str]:
    info = analyze(lambda ops: body.inner_fn(ops, make_vars("i", len(body.size)), make_vars("r", len(body.rsize))))
    return frozenset(n for n, _ in info.loads)


def _split(g: "GraphLowering", b: ComputedBuffer, rows_of: dict[tuple[int, int], list[frozenset[str]]],
           columns: set[str]) -> list[ComputedBuffer] | None:
    body = b.body
    h = g.heuristics
    cols, rows = prod(body.size), prod(body.rsize)
    if (body.reduction_type != "sum" or not body.src_dtype.is_floating_point
            or not h.column_partial_min_cols <= cols <= h.column_partial_max_cols
            or rows < h.column_partial_min_rows):
        return None
    reads = _contiguous(body, along_r=False)
    if not any(reads & partner for partner in rows_of.get((rows, cols), ())) or _loads(body) & columns:
        return None
    target = h.column_partial_programs_per_sm * device_facts(b.device).sm_count
    rows_per = _rows_per_program(rows, target)
    if rows_per is None:
        return None
    programs = rows // rows_per
    acc = torch.float64 if body.src_dtype == torch.float64 else torch.float32
    inner, rsize = body.inner_fn, tuple(body.rsize)

    def partial_fn(ops, idx: Sequence[sympy.Expr], ridx: Sequence[sympy.Expr]):
        row = idx[0] * rows_per + ridx[0]
        return inner(ops, list(idx[1:]), row_major_vars(row, rsize))

    psize = (programs, *body.size)
    part = ComputedBuffer(g.new_name(), Layout.contiguous(b.device, acc, psize),
                          ColumnPartialBody(psize, (rows_per,), "sum", partial_fn, body.src_dtype, rows),
                          b.origins, node_id=f"{b.node_id}.cols")
    g.buffer_fx[part.name] = g.buffer_fx.get(b.name, b.node_id)
    playout = part.layout

    def total_fn(ops, idx: Sequence[sympy.Expr], ridx: Sequence[sympy.Expr]):
        return ops.load(part.name, playout.index((ridx[0], *idx)))

    total = ComputedBuffer(b.name, b.layout, ReductionBody(tuple(body.size), (programs,), "sum", total_fn,
                                                           body.src_dtype), b.origins, node_id=b.node_id)
    return [part, total]


def _rows_per_program(rows: int, target: int) -> int | None:
    """The fewest rows per program that divides `rows` and gives at most `target` programs (at
    least two programs), or None when no divisor lies within 4x of rows / target."""
    low = max(1, -(-rows // target))
    for d in range(low, min(4 * low, rows // 2) + 1):
        if rows % d == 0:
            return d
    return None
