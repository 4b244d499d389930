"""early_loads: in a persistent reduction, the loads that nodes after a reduction make are issued at
the top of the kernel, before the reduction, as Inductor's codegen does (its loads section).

Note: codegen evaluates a node's body when its value is needed, so the loads of a node that uses a
reduction's value (rmsnorm's weight, a bias, a residual) are issued after the reduction's
cross-warp step (a barrier): each program then waits one more memory round trip before its
stores. Compiled for sm_90, the generated rmsnorm kernel issues its weight's loads right after the
barrier (SASS of the sm_90 compile). Issued first, they are in flight during the reduction.
A load is hoisted only where it is safe anywhere in the kernel: a direct load (no index computed
from another value) outside any masked() region, of a buffer the kernel does not produce. It holds
registers through the reduction, so it is a choice the search measures, never a default.
"""
from __future__ import annotations

from typing import Sequence

import sympy

from ..ir.ops import AnalysisHandler
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode


_VALUE = object()  # every value is this: a lowering that tests a value against None (pad) sees one


class _TopLevelLoads(AnalysisHandler):
    """Records the loads that are outside masked() regions and have no indirect index. Unlike its
    base, it returns a value from every op: AnalysisHandler's None would send a lowering that
    builds its mask from ops (constant_pad_nd's `cond is None`) down its unmasked branch."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.top: list[tuple[str, sympy.Expr]] = []

    def load(self, name: str, index: sympy.Expr) -> object:
        if self.depth == 0 and not (sympy.sympify(index).free_symbols & set(self.indirect_symbols)):
            self.top.append((name, index))
        super().load(name, index)
        return _VALUE

    def constant(self, value, dtype) -> object:
        return _VALUE

    def index_expr(self, expr, dtype) -> object:
        super().index_expr(expr, dtype)
        return _VALUE

    def to_dtype(self, value, dtype) -> object:
        return _VALUE

    def op(self, name, *args) -> object:
        super().op(name, *args)
        return _VALUE

    def masked(self, mask, body, other) -> object:
        self.depth += 1
        try:
            super().masked(mask, body, other)
        finally:
            self.depth -= 1
        return _VALUE


def top_level_loads(node: SchedulerNode) -> list[tuple[str, sympy.Expr]]:
    """The node's direct loads outside masked() regions, in body order (also cache_hints.py's)."""
    h = _TopLevelLoads()
    node.run_body(h)
    return h.top


def early_loads(members: Sequence[tuple[SchedulerNode, Placement]]) -> list[tuple[SchedulerNode, Placement,
                                                                                 list[tuple[str, sympy.Expr]]]]:
    """For each member that uses a reduction's value (directly or through another member), in member
    order, its hoistable loads of buffers from outside the kernel."""
    inside = {n.name for n, _ in members}
    after: set[str] = set()
    out = []
    for node, pl in members:
        if pl.cls == "red" or any(r in after for r in node.read_names):
            after.add(node.name)
        if pl.cls == "red" or node.name not in after:
            continue
        loads = [(name, index) for name, index in top_level_loads(node) if name not in inside]
        if loads:
            out.append((node, pl, loads))
    return out


def why_not_early_loads(members: Sequence[tuple[SchedulerNode, Placement]], is_reduction: bool, persistent: bool,
                        split: int) -> str | None:
    """None when early_loads changes this kernel, else why not — the one rule plan checks, the search
    and codegen ask."""
    if not is_reduction or not persistent or split != 1:
        return "early loads are for persistent reductions without split"
    if not early_loads(members):
        return "no load waits for a reduction"
    return None
