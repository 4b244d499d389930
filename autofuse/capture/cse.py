"""Common subexpressions of an inference graph computed once, and identity slices dropped.

Note: AOTAutograd's partitioner removes repeated pure ops from training graphs; inference graphs
reach the backend without that pass. A decoder's step repeats work per layer that depends only on
the step's inputs: torch's attention turns the same boolean mask into an additive one in every
layer (`where(mask, 0, -inf)`, each with its own scalar constants), and slices of a whole dim
(`x[:, :, :, :]`) are copied into the graph as ops. In a graph split into static regions
(`regions.py`) such ops run one by one with ATen at every step, and their constants leave the
first region as outputs, so each copy costs host time per step.

A node is replaced by an earlier node with the same target and the same arguments when its op is
functional and deterministic (no mutation, no random draw, no uninitialized memory). A graph
output is never replaced: the caller gets distinct tensors where eager returns distinct tensors.
"""
from __future__ import annotations

import operator
import sys
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

_UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                            "empty_permuted"})


def _pure(node: torch.fx.Node) -> bool:
    t = node.target
    if t is operator.getitem:
        return _tensors(node)
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    return t.overloadpacket.__name__ not in _UNINITIALIZED and _tensors(node)


def _tensors(node: torch.fx.Node) -> bool:
    """Does node produce tensors whose sizes are known without running it? A scalar read from data
    (`item`) or a size that data decides (`nonzero`) is an unbacked symbol of its own, which later
    nodes' recorded sizes name: such nodes stay."""
    v = node.meta.get("val")
    if v is None:
        return True
    values = v if isinstance(v, (list, tuple)) else (v,)
    return (all(isinstance(x, torch.Tensor) or x is None for x in values)
            and not free_unbacked_symbols([x for x in values if x is not None]))


def _key(value: Any) -> Any:
    """A hashable key of an argument, scalars with their type (0, 0.0 and False are equal in
    Python but make tensors of different dtypes). A node is its own key: the repeated nodes read
    before it were replaced already."""
    if isinstance(value, torch.fx.Node):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise TypeError("symbolic scalar")   # compared by identity only: leave such nodes
    hash(value)
    return (type(value), value)


def _is_output(node: torch.fx.Node) -> bool:
    return any(u.op == "output" for u in node.users)


def _identity_slice(node: torch.fx.Node) -> torch.fx.Node | None:
    """The input of `aten.slice(x, dim, 0, end >= sys.maxsize, 1)`, a view with x's own sizes and strides."""
    if node.target is not torch.ops.aten.slice.Tensor:
        return None
    args = [*node.args, *([None] * (5 - len(node.args)))][:5]
    x, _, start, end, step = args
    start = node.kwargs.get("start", start)
    end = node.kwargs.get("end", end)
    step = node.kwargs.get("step", 1 if step is None else step)
    full = (start in (None, 0) and (end is None or (isinstance(end, int) and end >= sys.maxsize)) and step == 1)
    return x if full and isinstance(x, torch.fx.Node) else None


def eliminate_common_subexpressions(gm: torch.fx.GraphModule) -> int:
    """Replace repeated pure nodes of gm by their first occurrence, and full-range slices by their
    input; the number of nodes removed."""
    seen: dict[Any, torch.fx.Node] = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not _pure(node):
            continue
        same = _identity_slice(node)
        if same is None:
            try:
                key = (node.target, _key(node.args), _key(dict(node.kwargs)))
            except TypeError:   # an unhashable or symbolic argument: the node stays as it is
                continue
            same = seen.setdefault(key, node)
            if same is node:
                continue
        if _is_output(node):
            continue
        node.replace_all_uses_with(same)
        gm.graph.erase_node(node)
        removed += 1
    if removed:
        gm.recompile()
    return removed
