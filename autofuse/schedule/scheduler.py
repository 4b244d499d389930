"""Scheduler graph: nodes from the lowered buffers, dependencies, dead-node elimination, ancestors."""
from __future__ import annotations

from typing import Any

from ..ir.values import Buffer, ComputedBuffer, ExternKernel, ReinterpretView
from .nodes import SchedulerNode, node_for_buffer, node_for_extern


def output_names(outputs: list[Any]) -> set[str]:
    names = set()
    for o in outputs:
        if isinstance(o, ReinterpretView):
            names.add(o.buffer.name)
        elif isinstance(o, Buffer):
            names.add(o.name)
    return names


class SchedulerGraph:
    """Nodes in a topological order (lowering order is one), with users and ancestors."""

    def __init__(self, buffers: list[ComputedBuffer | ExternKernel], outputs: list[Any]) -> None:
        nodes = []
        for i, b in enumerate(buffers):
            nodes.append(node_for_extern(b, i) if isinstance(b, ExternKernel) else node_for_buffer(b, i))
        self.graph_outputs = output_names(outputs)
        self.nodes = self._eliminate_dead(nodes)
        self.producer: dict[str, SchedulerNode] = {}
        for n in self.nodes:
            for o in n.outputs:
                self.producer[o] = n
        for n in self.nodes:
            for r in n.read_names:
                if r in self.producer:
                    self.producer[r].users.add(n.name)
        self.by_name = {n.name: n for n in self.nodes}
        self._compute_ancestors()

    def _eliminate_dead(self, nodes: list[SchedulerNode]) -> list[SchedulerNode]:
        live_buffers = set(self.graph_outputs)
        kept: list[SchedulerNode] = []
        for n in reversed(nodes):
            side_effect = n.kind == "extern" and n.extern.is_mutating
            if side_effect or any(o in live_buffers for o in n.outputs):
                kept.append(n)
                live_buffers |= set(n.read_names)
        kept.reverse()
        return kept

    def _compute_ancestors(self) -> None:
        for n in self.nodes:
            anc: set[str] = set()
            for r in n.read_names:
                p = self.producer.get(r)
                if p is not None:
                    anc.add(p.name)
                    anc |= p.ancestors
            n.ancestors = frozenset(anc)

    def producers_of(self, node: SchedulerNode) -> list[SchedulerNode]:
        return [self.producer[r] for r in node.read_names if r in self.producer]
