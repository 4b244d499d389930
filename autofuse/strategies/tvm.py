"""The `tvm` strategy: TVM Relax's FuseOps on the ATen graph.

Note: every ATen op gets an OpPatternKind (ElemWise < Broadcast < Injective < CommReduce <
OutEWiseFusable < Opaque). Over the post-dominator tree of the op graph, each op tries to join
the group of its immediate post-dominator: ElemWise/Broadcast ops when every op on the paths in
between is at most Injective (the sink may be a reduction); Injective ops (phase 1) when the
paths are at most Injective; OutEWiseFusable ops (mm) when the paths are at most Broadcast;
CommReduce only ever ends a group. A value crossing a group boundary is realized; a value used
only inside its group is recomputed (inlined), as FuseTIR would keep it in registers.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from ..lower.registry import LOWERINGS
from ..schedule.fusion import FusionGroup, FusionLog, can_fuse, merge, singleton
from ..schedule.scheduler import SchedulerGraph

ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = range(6)
KIND_NAMES = ["ElemWise", "Broadcast", "Injective", "CommReduce", "OutEWiseFusable", "Opaque"]

aten = torch.ops.aten
INJECTIVE_OPS = {aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.t, aten.transpose, aten.expand,
                 aten.squeeze, aten.unsqueeze, aten.slice, aten.select, aten.as_strided, aten.alias, aten.cat,
                 aten.constant_pad_nd, aten.gather, aten.index_select, aten.embedding, aten.index,
                 aten.slice_scatter, aten.select_scatter}
REDUCE_OPS = {aten.sum, aten.mean, aten.amax, aten.amin, aten.prod, aten.argmax, aten.argmin, aten.any, aten.all,
              aten.var, aten.var_mean, aten.logsumexp, aten.max, aten.min}
OUT_EWISE_OPS = {aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.convolution}


def pattern_kind(node: torch.fx.Node) -> int:
    if node.target is operator.getitem:
        return INJECTIVE
    packet = getattr(node.target, "overloadpacket", None)
    if packet in INJECTIVE_OPS:
        return INJECTIVE
    if packet in REDUCE_OPS:
        return COMM_REDUCE
    if packet in OUT_EWISE_OPS:
        return OUT_EWISE_FUSABLE
    if node.target not in LOWERINGS:
        return OPAQUE
    out = node.meta.get("val")
    shapes = [a.meta.get("val").shape for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    if isinstance(out, torch.Tensor) and any(s != out.shape for s in shapes):
        return BROADCAST
    return ELEMWISE


class FuseOps:
    """Union-find groups of FX nodes, built the way TVM's FuseOps builds them."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.kind = [pattern_kind(n) for n in self.nodes]
        self.parent = list(range(len(self.nodes)))
        self.group_kind = list(self.kind)
        self._post_dominators()

    def _users(self, i: int) -> list[int | None]:
        """Consumers of node i; None stands for the graph's output (the root)."""
        return [self.index.get(u) for u in self.nodes[i].users]

    def _post_dominators(self) -> None:
        n = len(self.nodes)
        self.ipdom: list[int | None] = [None] * n
        self.depth = [0] * n
        for i in reversed(range(n)):
            users = self._users(i)
            if not users or any(u is None for u in users):
                self.ipdom[i], self.depth[i] = None, 1
                continue
            lca = users[0]
            for u in users[1:]:
                lca = self._lca(lca, u)
            self.ipdom[i] = lca
            self.depth[i] = 1 if lca is None else self.depth[lca] + 1

    def _lca(self, a: int | None, b: int | None) -> int | None:
        while a is not None and b is not None and a != b:
            if self.depth[a] >= self.depth[b]:
                a = self.ipdom[a]
            else:
                b = self.ipdom[b]
        return a if a == b else None

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def _paths(self, src: int, sink: int) -> set[int]:
        """Nodes strictly after src on some path from src to sink (sink included)."""
        on_path: dict[int, bool] = {}

        def visit(i: int) -> bool:
            if i == sink:
                return True
            if i in on_path:
                return on_path[i]
            hit = False
            for u in self._users(i):
                if u is not None and visit(u):
                    hit = True
            on_path[i] = hit
            return hit

        visit(src)
        return {i for i, hit in on_path.items() if hit and i != src} | {sink}

    def _check_path(self, src: int, sink: int, cond) -> bool:
        return all(cond(self.group_kind[self.find(i)], i == sink) for i in self._paths(src, sink))

    def _commit(self, src: int, sink: int) -> None:
        target = self.find(sink)
        for i in self._paths(src, sink) | {src}:
            r = self.find(i)
            if r != target:
                self.parent[r] = target
                self.group_kind[target] = max(self.group_kind[target], self.group_kind[r])

    def run(self) -> list[int]:
        for phase in (0, 1):
            for i in range(len(self.nodes)):
                kind = self.group_kind[self.find(i)]
                dom = self.ipdom[i]
                if kind == OPAQUE or dom is None or self.find(i) == self.find(dom):
                    continue
                path_kind = max(self.kind[j] for j in self._paths(i, dom))
                if kind == OUT_EWISE_FUSABLE:
                    if phase == 0 and path_kind <= BROADCAST and self._check_path(i, dom, lambda k, s: k <= BROADCAST):
                        self._commit(i, dom)
                elif kind <= BROADCAST:
                    if path_kind <= INJECTIVE or path_kind == COMM_REDUCE:
                        def cond(k: int, is_sink: bool) -> bool:
                            return k <= INJECTIVE if not is_sink else k in (ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE)
                        if self._check_path(i, dom, cond):
                            self._commit(i, dom)
                elif kind == INJECTIVE and phase == 1:
                    if self._check_path(i, dom, lambda k, s: k <= INJECTIVE):
                        self._commit(i, dom)
        return [self.find(i) for i in range(len(self.nodes))]


def realize_decisions(gm: torch.fx.GraphModule) -> tuple[dict[str, bool], dict[str, int]]:
    """(realize decisions by FX node name, group id by FX node name) for TVM's grouping."""
    fuse = FuseOps(gm)
    roots = fuse.run()
    group_of = {n.name: roots[i] for i, n in enumerate(fuse.nodes)}
    decisions: dict[str, bool] = {}
    for i, n in enumerate(fuse.nodes):
        crosses = any(u.op != "call_function" or group_of[u.name] != roots[i] for u in n.users)
        decisions[n.name] = crosses
    return decisions, group_of


def partition(graph: SchedulerGraph, buffer_fx: dict[str, str], group_of: dict[str, int],
              log: FusionLog) -> list[FusionGroup]:
    """Scheduler nodes grouped by their FX node's TVM group; a group our codegen cannot run as one
    kernel is split where legality says no (the reason is logged)."""
    buckets: dict[Any, list] = {}
    for n in graph.nodes:
        fx = buffer_fx.get(n.name, n.name)
        key = ("g", group_of[fx]) if fx in group_of and n.kind != "extern" else ("n", n.name)
        buckets.setdefault(key, []).append(n)
    groups: list[FusionGroup] = []
    for nodes in buckets.values():
        current = singleton(nodes[0])
        for n in nodes[1:]:
            why = can_fuse(current, singleton(n), graph)
            if why is None:
                current = merge(current, singleton(n), graph)
            else:
                log.reject(current, singleton(n), f"TVM group split: {why}")
                groups.append(current)
                current = singleton(n)
        groups.append(current)
    return groups
