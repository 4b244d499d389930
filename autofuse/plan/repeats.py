"""Repeated structure in a graph: nodes that compute the same thing on the same shapes share a class.

A model's layers repeat: an 8-layer decoder's graph holds each layer's ops eight times. The search
decides fusions per class, not per site, so a trial fuses every layer alike; its kernels stay
identical across layers and are tuned once (`KernelTuner` reuses a choice per kernel key), and the
sampler learns one decision per layer kind instead of one per copy.
"""
from __future__ import annotations

import hashlib
from typing import Any

import torch.fx

ROUNDS = 3   # how far back (in producers) two nodes must agree to share a class


def _local(n: torch.fx.Node) -> str:
    """What a node is on its own: its op, its constant arguments, its value's shape and dtype."""
    val = n.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    shapes = [(tuple(v.shape), tuple(v.stride()), str(v.dtype)) if hasattr(v, "shape") and hasattr(v, "stride")
              else type(v).__name__ for v in vals]

    def const(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return "%"
        if isinstance(a, (list, tuple)):
            return [const(x) for x in a]
        return repr(a)
    return repr((n.op, str(n.target) if n.op != "placeholder" else "in", shapes,
                 const(list(n.args)), sorted((k, const(v)) for k, v in n.kwargs.items())))


def structural_classes(gm: torch.fx.GraphModule) -> dict[str, str]:
    """FX node name -> class (a short hash): equal where the node and its producers, ROUNDS deep,
    are the same ops on the same shapes (inputs count by shape and dtype, not by identity)."""
    nodes = list(gm.graph.nodes)
    label = {n: _local(n) for n in nodes}
    for _ in range(ROUNDS):
        label = {n: label[n] + "|" + ",".join(label[a] for a in n.all_input_nodes) for n in nodes}
        label = {n: hashlib.sha1(s.encode()).hexdigest()[:10] for n, s in label.items()}
    return {n.name: label[n] for n in nodes}


def class_of(node_id: str, classes: dict[str, str]) -> str:
    """A scheduler node id (an FX name, with `.k` for its k-th extra buffer) as its class."""
    root, dot, rest = node_id.partition(".")
    return classes.get(root, root) + (dot + rest if dot else "")
