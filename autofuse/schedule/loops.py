"""Where a node's loops sit in a kernel's (numel, rnumel) iteration space, and whether a consumer
reads a producer's output at the very point the producer writes it.

Note: a kernel iterates x in [0, numel) and r in [0, rnumel). Each node decomposes x (and r)
row-major by its own sizes. To compare two nodes' index expressions we refine both size lists
to a common factorization (its boundaries are the union of both lists' suffix products, which
must form a divisibility chain) and express every node variable as a linear combination of the
refined variables; equal expressions then mean the same memory element at the same (x, r).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import sympy

from ..ir.index import FloorDiv, ModIndex, contiguous_strides, make_vars, prod, row_major_vars, simplify_index
from .nodes import MemoryDep, SchedulerNode


XPID = sympy.Symbol("xpid", integer=True, nonnegative=True)   # a column-partial kernel's program id


@dataclass(frozen=True)
class Placement:
    """How a node maps onto a kernel: `cls` is "x" (x loop only), "r" (x and r loops), "red" (a
    reduction) or "col" (a column sum's partials in a row reduction's kernel: its columns are the
    kernel's r, its rows the kernel's x, summed per program; lower/column_partials.py);
    `split` is how many of the node's dims (in `order`) lie in the x loop.
    `order` lists the node's dims in kernel order, x dims first (None: as the node has them): a
    pointwise node whose sizes put the kernel's r extent before its x extent (the output of a
    softmax over a leading dim) runs with its loops reordered, as Inductor reorders loops to fuse.
    `cut` (dim, inner): the node's dim `dim` (order None) straddles the kernel's x and r extents, its
    outer `sizes[dim] // inner` values in x, its inner `inner` in r, as a group norm's output over
    [N, C, H, W] in its statistics kernel over [N * G, C / G * H * W]; the dim's variable is then
    `hi * inner + lo` (`viewed`), and `split` counts x dims of that view."""

    cls: str
    split: int
    order: tuple[int, ...] | None = None
    cut: tuple[int, int] | None = None

    def _view(self, node: SchedulerNode) -> tuple[list[sympy.Symbol], list[int]]:
        """The node's variables and sizes in kernel order, a cut dim as its (hi, lo) pair."""
        dims = list(self.order) if self.order is not None else list(range(len(node.sizes)))
        syms, sizes = [node.vars[d] for d in dims], [int(node.sizes[d]) for d in dims]
        if self.cut is None:
            return syms, sizes
        d, inner = self.cut
        hi, lo = cut_vars(node.vars[d])
        return syms[:d] + [hi, lo] + syms[d + 1:], sizes[:d] + [sizes[d] // inner, inner] + sizes[d + 1:]

    def viewed(self, node: SchedulerNode, index: sympy.Expr) -> sympy.Expr:
        """An index in the node's variables, in the variables of its view (`x_vars`, `r_vars`): a
        cut dim's variable as `hi * inner + lo`, simplified with the view's ranges (a group's
        statistics read at `c // inner` become `hi`); other placements leave it as it is."""
        if self.cut is None:
            return sympy.sympify(index)
        d, inner = self.cut
        hi, lo = cut_vars(node.vars[d])
        syms, sizes = self._view(node)
        ranges = dict(zip(syms, sizes)) | dict(zip(node.rvars, node.rsizes))
        return simplify_index(sympy.sympify(index).xreplace({node.vars[d]: hi * inner + lo}), ranges)

    def x_sizes(self, node: SchedulerNode) -> tuple[int, ...]:
        return tuple(self._view(node)[1][: self.split])

    def r_sizes(self, node: SchedulerNode) -> tuple[int, ...]:
        if self.cls == "red":
            return tuple(node.rsizes)
        if self.cls == "col":  # its columns; its rows are the kernel's x, split by program (kernel_vars)
            return tuple(node.sizes[1:])
        return tuple(self._view(node)[1][self.split:])

    def x_vars(self, node: SchedulerNode) -> list[sympy.Symbol]:
        return self._view(node)[0][: self.split]

    def r_vars(self, node: SchedulerNode) -> list[sympy.Symbol]:
        if self.cls == "red":
            return list(node.rvars)
        if self.cls == "r":
            return self._view(node)[0][self.split:]
        if self.cls == "col":
            return list(node.vars[1:])
        return []

    def kernel_vars(self, node: SchedulerNode) -> dict[sympy.Symbol, sympy.Expr]:
        """Each node variable as an expression of the kernel's xindex / rindex (row-major), so
        index expressions of different nodes of one kernel compare in the same terms. A "col"
        node's program is the kernel's `xpid`, its row within the program's share xindex minus the
        share's start, its columns rindex."""
        xsym = sympy.Symbol("xindex", integer=True, nonnegative=True)
        rsym = sympy.Symbol("rindex", integer=True, nonnegative=True)
        if self.cls == "col":
            cols = row_major_vars(rsym, node.sizes[1:])
            return {node.vars[0]: XPID, **dict(zip(node.vars[1:], cols)),
                    node.rvars[0]: xsym - XPID * node.rsizes[0]}
        xs = row_major_vars(xsym, self.x_sizes(node))
        rs = row_major_vars(rsym, self.r_sizes(node)) if self.cls in ("r", "red") else []
        out = dict(list(zip(self.x_vars(node), xs)) + list(zip(self.r_vars(node), rs)))
        if self.cut is not None:  # the cut dim's own variable too, for an index not yet `viewed`
            d, inner = self.cut
            hi, lo = cut_vars(node.vars[d])
            out[node.vars[d]] = out[hi] * inner + out[lo]
        return out


@dataclass(frozen=True)
class XOrder:
    """The order in which a kernel's programs and lanes walk its x extent: `sizes` are the x digits
    (row-major, as every node's index sees them) and `order` lists them outermost first as the
    lanes visit them. Nodes keep their logical x; only the lanes' mapping onto it changes, so any
    order is legal. Why: an outer reduction's lanes run along x, and where the digit that walks
    memory contiguously is not the last one (a layer norm over the last dim of a channels-last
    activation: channels 1 apart, the last kept dim C apart) lanes in logical order each read
    another sector."""

    sizes: tuple[int, ...]
    order: tuple[int, ...]

    def logical(self, xindex: sympy.Symbol
                ) -> tuple[sympy.Expr, dict[sympy.Symbol, int], dict[sympy.Symbol, sympy.Expr]]:
        """The logical x index as a sum of digit symbols, the digits' ranges, and each digit as an
        expression of the lanes' `xindex`."""
        digits = make_vars("xd", len(self.sizes))
        flat = sympy.Add(*(d * stride for d, stride in zip(digits, contiguous_strides(self.sizes))))
        lanes = {digits[k]: ModIndex(FloorDiv(xindex, stride), self.sizes[k])
                 for k, stride in zip(self.order, contiguous_strides([self.sizes[k] for k in self.order]))}
        return flat, dict(zip(digits, self.sizes)), lanes


MAX_REORDERED_DIMS = 8


def placement(node: SchedulerNode, numel: int, rnumel: int, is_reduction_kernel: bool) -> Placement | None:
    """The node's placement in a kernel of this iteration space, or None if its loops don't fit."""
    if node.kind == "reduction":
        if node.numel == numel and node.rnumel == rnumel:
            return Placement("red", len(node.sizes))
        if (is_reduction_kernel and node.is_column_partial and node.buffer.body.rows == numel
                and prod(node.sizes[1:]) == rnumel):
            return Placement("col", 0)
        return None
    if node.kind == "scan":  # its rows in x, the scanned dim (its last size) the whole r loop
        if is_reduction_kernel and node.sizes[-1] == rnumel and node.numel == numel * rnumel:
            return Placement("r", len(node.sizes) - 1)
        return None
    if not is_reduction_kernel:
        return Placement("x", len(node.sizes)) if node.numel == numel else None
    if rnumel > 1 and node.numel == numel * rnumel:
        ways = reorderings(node.sizes, numel, rnumel)
        if len(ways) > 1:   # equal sizes: the node's reads of the reduction's results name the r dims
            named = [w for w in ways if _reads_one_value_per_row(node, w, numel)]
            if len(named) == 1:
                order, split = named[0]
                return Placement("r", split, None if order == tuple(range(len(order))) else order)
        acc = 1
        for k in range(len(node.sizes) + 1):
            if acc == numel and prod(node.sizes[k:]) == rnumel:
                return Placement("r", k)
            if k < len(node.sizes):
                acc *= node.sizes[k]
        if len(ways) == 1:
            return Placement("r", ways[0][1], ways[0][0])
        cut = _cut(tuple(int(s) for s in node.sizes), numel, rnumel)
        if cut is not None:
            return Placement("r", cut[0] + 1, None, cut)
    if node.numel == numel:
        return Placement("x", len(node.sizes))
    return None


def _cut(sizes: tuple[int, ...], numel: int, rnumel: int) -> tuple[int, int] | None:
    """(dim, inner) where the row-major `sizes` meet the x / r boundary inside dim `dim`: the dims
    before it times its outer `sizes[dim] // inner` make `numel`, its inner `inner` times the dims
    after it `rnumel`; None where the boundary falls between dims or nowhere (or a dim is empty)."""
    if 0 in sizes or numel == 0:
        return None
    acc = 1
    for d, s in enumerate(sizes):
        if numel % acc == 0 and 1 < numel // acc < s and s % (numel // acc) == 0:
            inner = s // (numel // acc)
            if inner * prod(sizes[d + 1:]) == rnumel:
                return d, inner
        acc *= s
        if acc > numel:
            return None
    return None


def cut_vars(v: sympy.Symbol) -> tuple[sympy.Symbol, sympy.Symbol]:
    """The (outer, inner) variables of a dim cut across a kernel's x and r extents."""
    return (sympy.Symbol(f"{v.name}_hi", integer=True, nonnegative=True),
            sympy.Symbol(f"{v.name}_lo", integer=True, nonnegative=True))


def reorderings(sizes: Sequence[int], numel: int, rnumel: int) -> list[tuple[tuple[int, ...], int]]:
    """Every way to take some of `sizes`' dims (kept in order) as an r extent of `rnumel` and the
    rest as an x extent of `numel`: (the dims in kernel order, x dims first; how many are x dims).
    Dims of size 1 stay in x."""
    return list(_reorderings(tuple(int(s) for s in sizes), numel, rnumel))


@functools.lru_cache(maxsize=1 << 12)
def _reorderings(sizes: tuple[int, ...], numel: int, rnumel: int) -> tuple[tuple[tuple[int, ...], int], ...]:
    """`reorderings`, cached: fusion asks it of every node against every reduction kernel."""
    big = [d for d, s in enumerate(sizes) if s != 1]
    if len(big) > MAX_REORDERED_DIMS:
        return ()
    ways = []
    for mask in range(1, 1 << len(big)):
        r = [d for i, d in enumerate(big) if mask >> i & 1]
        if prod([sizes[d] for d in r]) == rnumel and prod([sizes[d] for d in big if d not in r]) == numel:
            x = [d for d in range(len(sizes)) if d not in r]
            ways.append((tuple(x + r), len(x)))
    return tuple(ways)


def _reads_one_value_per_row(node: SchedulerNode, way: tuple[tuple[int, ...], int], numel: int) -> bool:
    """Does the node read a value of `numel` elements (a reduction's result) that moves with every
    x dim of `way` and with none of its r dims? A softmax's last step over channels of [N, C, H, W]
    with H = W = C reads the row's max and sum at (n, h, w): that names the r dim among equal sizes."""
    order, split = way
    xs = {node.vars[d] for d in order[:split] if node.sizes[d] != 1}
    rs = {node.vars[d] for d in order[split:]}
    return any(not d.is_indirect and d.footprint() == numel and xs <= d.symbols and not rs & d.symbols
               for d in node.reads)


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
    if pp.cls == "col":
        return f"{consumer.name} reads {read.name}, column partials complete only when their kernel ends"
    if cp.cls == "col":
        return _column_reads_point(producer, pp, consumer, cp, read)
    if pp.cls == "r" and cp.cls == "x":
        return f"{consumer.name} (x loop only) reads {read.name}, which varies along the r loop"
    xa, xb = pp.x_sizes(producer), cp.x_sizes(consumer)
    xr = refine([s for s in xa if s != 1], [s for s in xb if s != 1])
    if xr is None:
        return f"loops of {producer.name} {tuple(xa)} and {consumer.name} {tuple(xb)} do not split alike"
    xs = make_vars("c", len(xr))
    p_vars, p_sizes = producer.vars, list(producer.sizes)
    c_sizes_x, c_sizes_r = list(cp.x_sizes(consumer)), list(cp.r_sizes(consumer))
    c_all_vars_x, c_all_vars_r = cp.x_vars(consumer), cp.r_vars(consumer)
    # drop size-1 dims: their variables are always 0 — each node's own (nodes name their variables
    # alike, so the producer's i1 of size 1 is not the consumer's i1)
    # (sympy zeros: xreplace of a bare symbol returns the replacement itself)
    p_zero = {v: sympy.Integer(0) for v, s in zip(p_vars, p_sizes) if s == 1}
    c_zero = {v: sympy.Integer(0) for v, s in zip(c_all_vars_x, c_sizes_x) if s == 1}
    c_zero.update({v: sympy.Integer(0) for v, s in zip(c_all_vars_r, c_sizes_r) if s == 1})
    w = pp.viewed(producer, producer.write.index).xreplace(p_zero)
    r = cp.viewed(consumer, read.index).xreplace(c_zero)
    pxv = [v for v, s in zip(pp.x_vars(producer), pp.x_sizes(producer)) if s != 1]
    pxs = [s for s in pp.x_sizes(producer) if s != 1]
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
        prv = [v for v, s in zip(pp.r_vars(producer), pp.r_sizes(producer)) if s != 1]
        crv = [v for v, s in zip(c_all_vars_r, c_sizes_r) if s != 1]
        w = _canonical(w, prv, pr, rr, rs)
        r = _canonical(r, crv, cr, rr, rs)
        # the r pass knows only the r ranges: simplify again with the x ranges too
        ranges = {**dict(zip(xs, xr)), **dict(zip(rs, rr))}
        w, r = simplify_index(w, ranges), simplify_index(r, ranges)
    else:
        # an x-only producer read by a node with r variables too (a norm's statistics read by its
        # normalizing node): the read may name the consumer's r variables where they cancel
        # (i // 1024 with i < 1024), which only their ranges show
        ranges = {**dict(zip(xs, xr)), **{v: s for v, s in zip(c_all_vars_r, c_sizes_r) if s != 1}}
        r = simplify_index(r, ranges)
    if sympy.expand(w - r) != 0:
        return f"{consumer.name} reads {read.name}[{r}] but {producer.name} writes {read.name}[{w}]"
    return None


def _column_reads_point(producer: SchedulerNode, pp: Placement, consumer: SchedulerNode, cp: Placement,
                        read: MemoryDep) -> str | None:
    """same_point for a "col" consumer: both indices in kernel terms (xindex, rindex; the
    consumer's program cancels out of a row it reads), equal once expanded."""
    w = sympy.expand(sympy.sympify(producer.write.index).xreplace(pp.kernel_vars(producer)))
    r = sympy.expand(sympy.sympify(read.index).xreplace(cp.kernel_vars(consumer)))
    if w.free_symbols & {XPID} or sympy.expand(w - r) != 0:
        return f"{consumer.name} reads {read.name}[{r}] but {producer.name} writes {read.name}[{w}] in the row kernel"
    return None


def reduction_phases(members: Sequence[tuple[SchedulerNode, Placement]],
                     online: dict[str, str] | None = None) -> dict[str, int]:
    """Node -> the r pass of a looped reduction kernel it runs in: a node after an in-kernel
    reduction runs one pass later than the reduction (its value exists only after its loop), but
    an online softmax's sum (`online`: sum -> its max) runs in its max's pass."""
    online = online or {}
    by_buffer = {n.name: (n, p) for n, p in members}
    phase: dict[str, int] = {}
    for node, _ in members:
        p = 0
        for dep in node.read_names:
            if dep in by_buffer and dep in phase:
                after = by_buffer[dep][1].cls == "red" and online.get(node.name) != dep
                p = max(p, phase[dep] + (1 if after else 0))
        phase[node.name] = p
    return phase


def r_passes(members: Sequence[tuple[SchedulerNode, Placement]]) -> int:
    """How many times a looped kernel of these members walks its r range (without online
    softmax): 1 for a plain reduction, 2 for a norm (statistics, then the normalized row), 3 for
    a softmax (max, sum, then the output)."""
    phase = reduction_phases(members)
    return 1 + max([phase[n.name] for n, p in members if p.cls in ("r", "red")], default=0)
