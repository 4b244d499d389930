"""Editing a captured ATen graph: a copy to rewrite (the original stays the eager fallback's), the
fake mode its values were traced under, and a new node's fake value, as capture records it."""
from __future__ import annotations

from typing import Any, Container, Iterable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode


def val(n: Any) -> Any:
    """A node's traced (fake) value; a constant argument as itself."""
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else n


def upstream(nodes: Iterable[torch.fx.Node], within: Container[torch.fx.Node]) -> set[torch.fx.Node]:
    """The nodes among `nodes` that lie `within`, and every node within it that they are computed
    from through nodes within it."""
    out: set[torch.fx.Node] = set()
    todo = [n for n in nodes if n in within]
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(i for i in n.all_input_nodes if i in within)
    return out


def copy_graph(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, dict[torch.fx.Node, torch.fx.Node]]:
    """A copy of gm to edit, and each original node's copy (node metas copied: fake values stay shared)."""
    graph, copies = torch.fx.Graph(), {}
    output = graph.output(graph.graph_copy(gm.graph, copies))
    output.meta.update(next(n for n in reversed(gm.graph.nodes) if n.op == "output").meta)   # SAVED_FROM
    return torch.fx.GraphModule(gm, graph), copies


def fake_mode_of(gm: torch.fx.GraphModule) -> FakeTensorMode | None:
    """The fake mode of the graph's traced values (None for a graph traced without them)."""
    return next((v.fake_mode for n in gm.graph.nodes for v in [val(n)]
                 if isinstance(getattr(v, "fake_mode", None), FakeTensorMode)), None)


def set_meta(node: torch.fx.Node, fake_mode: FakeTensorMode | None) -> None:
    """The node's fake output, as capture records it, where the graph carries fake values."""
    if fake_mode is None:
        return
    args = torch.fx.node.map_arg(node.args, val)
    kwargs = torch.fx.node.map_arg(node.kwargs, val)
    with fake_mode:
        node.meta["val"] = node.target(*args, **kwargs)
