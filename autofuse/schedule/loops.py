"""Where a node's loops sit in a kernel's (numel, rnumel) iteration space, and whether a consumer
reads a producer's output at the very point the producer writes it.

Note: a kernel iterates x in [0, numel) and r in [0, rnumel). Each node decomposes x (and r)
row-major by its own sizes. To compare two nodes' index expressions we refine both size lists
to a common factorization (its boundaries are the union of both lists' suffix products, which
must form a divisibility chain) and express every node variable as a linear combination of the
refined variables; equal expressions then mean the same memory element at the same (x, r).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sympy

from ..ir.index import make_vars, prod, row_major_vars, simplify_index
from .nodes import MemoryDep, SchedulerNode


@dataclass(frozen=True)
class Placement:
    """How a node maps onto a kernel: `cls` is "x" (x loop only), "r" (x and r loops) or
    "red" (a reduction); `split` is how many of the node's leading sizes lie in the x loop."""

    cls: str
    split: int

    def x_sizes(self, node: SchedulerNode) -> tuple[int, ...]:
        return tuple(node.sizes[: self.split])

    def r_sizes(self, node: SchedulerNode) -> tuple[int, ...]:
        if self.cls == "red":
            return tuple(node.rsizes)
        return tuple(node.sizes[self.split:])

    def kernel_vars(self, node: SchedulerNode) -> dict[sympy.Symbol, sympy.Expr]:
        """Each node variable as an expression of the kernel's xindex / rindex (row-major), so
        index expressions of different nodes of one kernel compare in the same terms."""
        xsym = sympy.Symbol("xindex", integer=True, nonnegative=True)
        rsym = sympy.Symbol("rindex", integer=True, nonnegative=True)
        xs = row_major_vars(xsym, self.x_sizes(node))
        if self.cls == "red":
            rs, rvars = row_major_vars(rsym, self.r_sizes(node)), node.rvars
        elif self.cls == "r":
            rs, rvars = row_major_vars(rsym, self.r_sizes(node)), node.vars[self.split:]
        else:
            rs, rvars = [], []
        return dict(list(zip(node.vars[: self.split], xs)) + list(zip(rvars, rs)))


def placement(node: SchedulerNode, numel: int, rnumel: int, is_reduction_kernel: bool) -> Placement | None:
    """The node's placement in a kernel of this iteration space, or None if its loops don't fit."""
    if node.kind == "reduction":
        if node.numel == numel and node.rnumel == rnumel:
            return Placement("red", len(node.sizes))
        return None
    if node.kind == "scan":  # its rows in x, the scanned dim (its last size) the whole r loop
        if is_reduction_kernel and node.sizes[-1] == rnumel and node.numel == numel * rnumel:
            return Placement("r", len(node.sizes) - 1)
        return None
    if not is_reduction_kernel:
        return Placement("x", len(node.sizes)) if node.numel == numel else None
    if rnumel > 1 and node.numel == numel * rnumel:
        acc = 1
        for k in range(len(node.sizes) + 1):
            if acc == numel and prod(node.sizes[k:]) == rnumel:
                return Placement("r", k)
            if k < len(node.sizes):
                acc *= node.sizes[k]
    if node.numel == numel:
        return Placement("x", len(node.sizes))
    return None


def refine(a: Sequence[int], b: Sequence[int]) -> list[int] | None:
    """Common refinement of two row-major factorizations of the same total, or None."""
    if prod(a) != prod(b):
        return None
    cuts = sorted({prod(a[k:]) for k in range(len(a) + 1)} | {prod(b[k:]) for k in range(len(b) + 1)}, reverse=True)
    out = []
    for hi, lo in zip(cuts, cuts[1:]):
        if lo == 0 or hi % lo != 0:
            return None
        out.append(hi // lo)
    return out


def express(sizes: Sequence[int], refined: Sequence[int], syms: Sequence[sympy.Symbol]) -> list[sympy.Expr]:
    """Each row-major variable of `sizes` as a linear combination of the refined variables."""
    suffix_ref = [prod(refined[j + 1:]) for j in range(len(refined))]
    out = []
    for k in range(len(sizes)):
        hi, lo = prod(sizes[k:]), prod(sizes[k + 1:])
        expr = sympy.Integer(0)
        for j, s in enumerate(syms):
            if lo <= suffix_ref[j] < hi:
                expr += s * (suffix_ref[j] // lo)
        out.append(expr)
    return out


def _canonical(dep_index: sympy.Expr, node_vars: Sequence[sympy.Symbol], node_sizes: Sequence[int],
               refined: Sequence[int], syms: Sequence[sympy.Symbol]) -> sympy.Expr:
    subs = dict(zip(node_vars, express(node_sizes, refined, syms)))
    return simplify_index(dep_index.xreplace(subs), dict(zip(syms, refined)))


def same_point(producer: SchedulerNode, pp: Placement, consumer: SchedulerNode, cp: Placement,
               read: MemoryDep) -> str | None:
    """None when `read` by consumer is the element producer writes at the same (x, r), else why not."""
    if read.is_indirect:
        return f"{consumer.name} reads {read.name} through an indirect index"
    if pp.cls == "r" and cp.cls == "x":
        return f"{consumer.name} (x loop only) reads {read.name}, which varies along the r loop"
    xa, xb = pp.x_sizes(producer), cp.x_sizes(consumer)
    xr = refine([s for s in xa if s != 1], [s for s in xb if s != 1])
    if xr is None:
        return f"loops of {producer.name} {tuple(xa)} and {consumer.name} {tuple(xb)} do not split alike"
    xs = make_vars("c", len(xr))
    p_vars, c_vars = producer.vars, consumer.vars + consumer.rvars
    p_sizes = list(producer.sizes)
    c_sizes_x, c_sizes_r = list(cp.x_sizes(consumer)), list(cp.r_sizes(consumer))
    c_all_vars_x = (consumer.vars[: cp.split])
    c_all_vars_r = consumer.vars[cp.split:] if cp.cls == "r" else (consumer.rvars if cp.cls == "red" else [])
    # drop size-1 dims: their variables are always 0
    # (sympy zeros: xreplace of a bare symbol returns the replacement itself)
    zero = {v: sympy.Integer(0) for v, s in zip(p_vars, p_sizes) if s == 1}
    zero.update({v: sympy.Integer(0) for v, s in zip(c_all_vars_x, c_sizes_x) if s == 1})
    zero.update({v: sympy.Integer(0) for v, s in zip(c_all_vars_r, c_sizes_r) if s == 1})
    w = sympy.sympify(producer.write.index).xreplace(zero)
    r = sympy.sympify(read.index).xreplace(zero)
    pxv = [v for v, s in zip(p_vars[: pp.split], p_sizes[: pp.split]) if s != 1]
    pxs = [s for s in p_sizes[: pp.split] if s != 1]
    cxv = [v for v, s in zip(c_all_vars_x, c_sizes_x) if s != 1]
    cxs = [s for s in c_sizes_x if s != 1]
    w = _canonical(w, pxv, pxs, xr, xs)
    r = _canonical(r, cxv, cxs, xr, xs)
    if pp.cls == "r":
        pr = [s for s in pp.r_sizes(producer) if s != 1]
        cr = [s for s in c_sizes_r if s != 1]
        rr = refine(pr, cr)
        if rr is None:
            return f"r loops of {producer.name} and {consumer.name} do not split alike"
        rs = make_vars("q", len(rr))
        prv = [v for v, s in zip(p_vars[pp.split:], p_sizes[pp.split:]) if s != 1]
        crv = [v for v, s in zip(c_all_vars_r, c_sizes_r) if s != 1]
        w = _canonical(w, prv, pr, rr, rs)
        r = _canonical(r, crv, cr, rr, rs)
        # the r pass knows only the r ranges: simplify again with the x ranges too
        ranges = {**dict(zip(xs, xr)), **dict(zip(rs, rr))}
        w, r = simplify_index(w, ranges), simplify_index(r, ranges)
    if sympy.expand(w - r) != 0:
        return f"{consumer.name} reads {read.name}[{r}] but {producer.name} writes {read.name}[{w}]"
    return None
