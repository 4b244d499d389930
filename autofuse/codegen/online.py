"""Online softmax: a looped kernel's `sum(exp(v - max(v)))` in the same r loop as the max.

Note: without it a looped kernel reads each row twice (pass 1: the max; pass 2: the sum of
exponentials, which needs the max), which is what keeps a cross-entropy over a 32000 vocabulary
at half the bandwidth. Each lane keeps its running max m (the max's own accumulator) and its sum
relative to m. With d = v - m, one exp per element: v <= m adds exp(d); v > m rescales the sum by
exp(-d) and adds 1 (v is the new max). At the end each lane's sum is brought to the row's max by
exp(m - max). Legal when the sum's input is exactly `exp(v - m)` with `v` the max reduction's own
input (so v <= m: nothing overflows) — what softmax, log_softmax and cross-entropy decompose to.
NaN and inf follow eager: a NaN in the row makes the sum NaN, a row of -inf gives NaN. (A per-row
reference, moved once per r block, measured slower on the H200: the cross-warp max per block
costs more than the per-element instructions it saves.)

Chunks (`chunk_width`): where each thread holds V contiguous elements of the row (one 16-byte
load), the update works per chunk instead of per element: the chunk's max in registers, then the
sum kept relative to R = m·log2(e) as Σ 2^(v·log2(e) − R), one FFMA and one ex2.approx.ftz per
element — no compare, no select, no exp fix-ups. About 8 SASS instructions an element instead of
16; on the H200 the cross-entropy logsumexp went from 186 µs (66% of copy bandwidth) to 129 µs
(95%) (docs/defaults.md). R is rounded, but every sum is kept relative to that same
rounded R, and the final step brings lanes to the row's max with 2^(R − M·log2(e)), whose product
is exact in an FMA: the error stays that of one exp.
Which pairs run online is decided here (`online_pairs`); OnlineMixin emits the updates and the
final step inside KernelWriter's r loop (looped.py).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import sympy
import torch

from ..ir.index import fold_divmod
from ..ir.ops import OpsHandler
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .emitter import TV
from .printer import tl_dtype

Tree = int  # a body traced to an expression, hash-consed: equal expressions get equal ids
LOG2E = "1.4426950408889634"


class _Terms:
    """Hash-consing of traced expressions: each distinct (tag, *child ids) gets one id, so an
    expression that reads a producer many times (a chain where each op reads the one before twice)
    stays linear in size and two traces compare as two ints instead of two unfolded trees."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}

    def __call__(self, *term: Any) -> Tree:
        return self.ids.setdefault(term, len(self.ids))


class _Tracer(OpsHandler):
    """Traces a node body to a term: loads in kernel index terms, in-kernel pointwise producers
    inlined, the max reduction `max_name` as a leaf, casts between float types dropped (the sum
    may see v at another float precision than the max did: the identity still holds); anything
    opaque (masked bodies, indirect indices) becomes a unique leaf, which never matches. Each
    producer is traced once per tracer (`done`)."""

    _ids = itertools.count()

    def __init__(self, by_buffer: dict[str, tuple[SchedulerNode, Placement]], max_name: str | None,
                 terms: _Terms) -> None:
        self.by_buffer = by_buffer
        self.max_name = max_name
        self.term = terms
        self.current: tuple[SchedulerNode, Placement] | None = None
        self.done: dict[str, Tree] = {}
        self.needs: dict[str, bool] = {}

    def trace(self, node: SchedulerNode, pl: Placement) -> Tree:
        if node.name in self.done:
            return self.done[node.name]
        saved, self.current = self.current, (node, pl)
        try:
            out = self.done[node.name] = node.run_body(self)
            return out
        finally:
            self.current = saved

    def load(self, name: str, index: Any) -> Tree:
        if name == self.max_name:
            return self.term("max")
        if name in self.by_buffer:
            node, pl = self.by_buffer[name]
            if pl.cls == "red":
                return self.term("reduction", name)
            if self.max_name is not None and self._needs_max(node):
                # a producer between the max and the sum: the online update would skip it
                return self.term("opaque", next(self._ids))
            return self.trace(node, pl)
        return self.term("load", name, self._index(index))

    def _needs_max(self, node: SchedulerNode) -> bool:
        if node.name not in self.needs:
            self.needs[node.name] = any(
                r == self.max_name or (r in self.by_buffer and self.by_buffer[r][1].cls != "red"
                                       and self._needs_max(self.by_buffer[r][0])) for r in node.read_names)
        return self.needs[node.name]

    def _index(self, index: Any) -> str:
        node, pl = self.current
        return str(fold_divmod(sympy.expand(sympy.sympify(index).xreplace(pl.kernel_vars(node)))))

    def constant(self, value: Any, dtype: torch.dtype) -> Tree:
        return self.term("const", repr(value), str(dtype))

    def index_expr(self, expr: Any, dtype: torch.dtype) -> Tree:
        return self.term("index", self._index(expr), str(dtype))

    def to_dtype(self, value: Tree, dtype: torch.dtype) -> Tree:
        return value if dtype.is_floating_point else self.term("cast", value, str(dtype))

    def masked(self, mask: Tree, body: Callable[[], Tree], other: Any) -> Tree:
        return self.term("opaque", next(self._ids))

    def indirect(self, value: Tree, size: int) -> sympy.Symbol:
        return sympy.Symbol(f"indirect{next(self._ids)}", integer=True)

    def op(self, name: str, *args: Tree) -> Tree:
        return self.term("op", name, *args)


def online_pairs(members: Sequence[tuple[SchedulerNode, Placement]]) -> dict[str, str]:
    """sum reduction -> the max reduction it can run online with (see the module note)."""
    by_buffer = {n.name: (n, p) for n, p in members}
    maxes = [(n, p) for n, p in members
             if p.cls == "red" and n.buffer.body.reduction_type == "max" and n.buffer.body.src_dtype.is_floating_point]
    pairs: dict[str, str] = {}
    term = _Terms()
    for node, pl in members:
        if not maxes or pl.cls != "red":
            continue
        body = node.buffer.body
        if body.reduction_type != "sum" or not body.src_dtype.is_floating_point:
            continue
        for a, apl in maxes:
            if a.name not in node.read_names:
                continue
            v = _Tracer(by_buffer, None, term).trace(a, apl)
            if _Tracer(by_buffer, a.name, term).trace(node, pl) == term("op", "exp", term("op", "sub", v, term("max"))):
                pairs[node.name] = a.name
                break
    return pairs


def why_not_online(members: Sequence[tuple[SchedulerNode, Placement]], is_reduction: bool) -> str | None:
    """None when the kernel has a sum(exp(v - max(v))) to run online, else why not — the one rule
    that plan checks, default heuristics and codegen ask."""
    if not is_reduction:
        return "online softmax needs a reduction kernel"
    if not online_pairs(members):
        return "no sum(exp(v - max(v))) over the max's own input in this kernel"
    return None


def strided_rows(members: Sequence[tuple[SchedulerNode, Placement]], names: Sequence[str]) -> bool:
    """Do the reductions `names` read memory with a stride along their innermost r variable (a
    softmax over a leading or middle dim)? Their loads then run along x, where memory is
    contiguous: no thread holds contiguous r elements, and a chunk along r would cost a cross-thread
    reduction (through shared memory, with a barrier) on every step of the loop."""
    for node, _ in members:
        if node.name not in names or not node.rvars:
            continue
        inner = node.rvars[-1]
        coeffs = [d.index.coeff(inner) for d in node.reads if not d.is_indirect and d.index.has(inner)]
        if coeffs and all(c != 1 for c in coeffs):
            return True
    return False


def chunk_width(xblock: int, rblock: int, num_warps: int, itemsize: int) -> int:
    """Elements per chunk of the online update: those of one thread's 16-byte load of the widest
    input, when each thread holds that many contiguous r elements; 1 (per-element lanes) otherwise."""
    v = max(1, 16 // max(itemsize, 1))
    per_thread = xblock * rblock // (32 * num_warps)
    while v > 1 and (v > per_thread or rblock % v):
        v //= 2
    return v


class OnlineMixin:
    """KernelWriter's online updates and final step (reads the writer's state, set in
    KernelWriter.__init__: `online` the pairs, `chunk` the chunk width)."""

    def _online_chunk(self) -> int:
        """chunk_width for the widest buffer the r loop reads (its load sets the thread layout);
        1 where the rows are strided (strided_rows)."""
        if strided_rows(self.members, tuple(self.online.values())):
            return 1
        reads = {r for n, p in self.members if p.cls in ("r", "red") for r in n.read_names} - set(self.by_buffer)
        size = max((self.dtypes[r].itemsize for r in reads if r in self.dtypes), default=4)
        c = self.config
        return chunk_width(c.XBLOCK, c.RBLOCK, c.num_warps, size)

    def _online_update(self, node: SchedulerNode, v: TV, accs: dict) -> None:
        """Before the max's update: each partner sum (of exp(v - max)) relative to the lane's
        running max m. With d = v - m, one exp per element: v <= m adds exp(d); v > m rescales the
        sum by exp(-d) and adds 1 (v is the new max). A NaN d (v = m = -inf, or a NaN) adds
        nothing: the non-propagating max turns it into exp(-inf) = 0 — the final step makes a row
        with a NaN NaN. Few instructions matter: this runs on every element of a long row."""
        m, _, dt = accs[node.name]
        d = self.cse(f"{v} - {m}", dt)
        up = self.cse(f"{d} > 0", torch.bool)
        e = self.cse(f"_exp_neg_abs({d})", dt)
        for b, a in self.online.items():
            if a == node.name:
                bacc = accs[b][0]
                self.emit(f"{bacc} = tl.where({up}, {bacc} * {e} + 1.0, {bacc} + {e})")

    def _online_chunk_update(self, node: SchedulerNode, v: TV, accs: dict) -> None:
        """The chunked update: per chunk of `self.chunk` elements its max m' (NaN-propagating),
        R = m'·log2(e) (0 for a chunk of -inf, so -inf adds exp2(-inf) = 0), then each partner sum
        s·2^(R_old − R) + Σ 2^(v·log2(e) − R), with R_old = -inf (scale 0, s is 0) while the lane
        has seen only -inf; the max's accumulator becomes m'."""
        m, _, dt = accs[node.name]
        f32 = "" if dt == torch.float32 else ".to(tl.float32)"
        v3 = self.cse(f"tl.reshape({v}, [XBLOCK, RBLOCK // {self.chunk}, {self.chunk}])", dt)
        mn = self.cse(f"tl.maximum({m}, tl.reduce({v3}, 2, _max_nan), propagate_nan=tl.PropagateNan.ALL)", dt)
        # _log2e_mul: one rounding, the same wherever R is used (a compiler-fused FMA would differ)
        ref = self.cse(f"_log2e_mul(tl.where({mn} == float(\"-inf\"), 0.0, {mn}){f32})", torch.float32)
        old = self.cse(f"_log2e_mul({m}{f32})", torch.float32)  # -inf before the first finite value: scale 0
        scale = self.cse(f"_exp2_ftz({old} - {ref})", torch.float32)
        # one FMA: the product v·log2(e) unrounded, so the error is that of ref alone (see the note)
        total = self.cse(f"tl.reduce(_exp2_ftz(tl.fma({v3}{f32}, {LOG2E}, -{ref}[:, :, None])), 2, _fast_sum)",
                         torch.float32)
        for b, a in self.online.items():
            if a == node.name:
                bacc, _, bdt = accs[b]
                cast = "" if bdt == torch.float32 else f".to({tl_dtype(bdt)})"
                self.emit(f"{bacc} = ({bacc} * {scale} + {total}){cast}")
        self.emit(f"{m} = {mn}")

    def _online_finish(self, node: SchedulerNode, accs: dict) -> TV:
        """The sum relative to the final max: each lane's sum times exp(lane max - max) (chunked:
        2^(R - max·log2(e)), R the lane's reference); a row of -inf (exp(-inf - -inf)) or with a
        NaN is NaN, as in eager."""
        a = self.online[node.name]
        acc, _, dt = accs[node.name]
        m = self.scope.node_value(a)
        if self.chunk > 1:
            f32 = "" if accs[a][2] == torch.float32 else ".to(tl.float32)"
            ref = self.cse(f"_log2e_mul(tl.where({accs[a][0]} == float(\"-inf\"), 0.0, {accs[a][0]}){f32})",
                           torch.float32)
            lanes = self.cse(f"tl.where({acc} == 0, 0.0, {acc} * tl.exp2(tl.fma(-{m}{f32}, {LOG2E}, {ref})))", dt)
        else:
            lanes = self.cse(f"tl.where({acc} == 0, 0.0, {acc} * tl.exp({accs[a][0]} - {m}))", dt)
        total = self.cse(f"tl.reduce({lanes}, 1, _fast_sum)[:, None]", dt)
        if self.role == "partial":  # the chunk's sum relative to the chunk's max (split.py's combine)
            return total
        return self.cse(f"tl.where({m} > float(\"-inf\"), {total}, float(\"nan\"))", dt)
