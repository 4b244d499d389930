"""What a counting sort (lower/sort.py) computes on the way to its outputs, read by the ops that
follow it instead of computing it again.

Note: a mixture of experts groups its tokens by expert with a sort of their expert ids, then
counts the tokens per expert (`histc` of the sorted ids) and, after the experts ran, puts the
tokens back in order through the inverse permutation (`inv[perm] = arange(n)`). The counting sort
has both already: the running count of each key ends at that key's count, and the rank it stores
each key at is the inverse permutation. Reading them saves a pass over the keys and a scatter:
three launches of each MoE layer (the count, its running sum, which then joins the sort's own scan
of the counts, and the scatter).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import sympy
import torch
import torch.fx

from ..ir.values import ComputedBuffer

aten = torch.ops.aten

VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.clone.default,
         aten.alias.default)
CONVERSIONS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default, *VIEWS)
ARANGES = (aten.arange.default, aten.arange.start, aten.arange.start_step)


@dataclass(frozen=True)
class CountingSort:
    """A counting sort's outputs (buffer names), its running counts of each key [R, S] (the last
    column: each key's count) and each key's rank, an int32 loader over the keys' positions."""

    values: str
    positions: str
    running: ComputedBuffer
    rank: Callable[..., Any]


def record(g: Any, done: CountingSort) -> None:
    g.counting_sorts.update({done.values: done, done.positions: done})


def _sort_of(g: Any, value: Any) -> CountingSort | None:
    return g.counting_sorts.get(getattr(value, "name", None))


def sorted_key_counts(g: Any, node: torch.fx.Node, bins: int, lo: float, hi: float) -> Callable[..., Any] | None:
    """The loader of histc(keys, bins, lo, hi)'s counts where node (the histogram's input, through
    dtype conversions and views) holds a counting sort's sorted keys in [0, bins) with lo = 0 and
    hi = bins - 1: then key k falls in bin k (k * bins / (bins - 1) truncates to k below bins - 1;
    the top edge goes to the last bin), and its count is the sort's running count at the last
    position. None for any other histogram."""
    src = node.args[0]
    while isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target in CONVERSIONS:
        src = src.args[0]
    value = g.env.get(src) if isinstance(src, torch.fx.Node) else None
    done = _sort_of(g, value)
    if done is None or done.values != value.name or (lo, hi) != (0, bins - 1) \
            or done.running.layout.size[0] != bins:
        return None
    last, seen = sympy.Integer(done.running.layout.size[1] - 1), done.running.loader()
    return lambda ops, idx: seen(ops, [idx[0], last])


def inverse_permutation(g: Any, x: Any, indices: Sequence[Any], values: Any) -> Callable[..., Any] | None:
    """The int32 loader of `x[perm] = arange(n)` where perm is a counting sort's permutation of the
    n elements of x: element j is key j's rank. None for any other index_put."""
    node = g.node.args[2]
    if len(indices) != 1 or not isinstance(node, torch.fx.Node) or node.target not in ARANGES:
        return None
    done = _sort_of(g, indices[0])
    nums = [a for a in node.args if isinstance(a, (int, float))]
    start, step = (nums[0] if len(nums) > 1 else 0), (nums[2] if len(nums) == 3 else 1)
    n = done.running.layout.size[1] if done is not None else -1
    if done is None or done.positions != indices[0].name or (start, step) != (0, 1) \
            or tuple(x.size) != (n,) or tuple(values.size) != (n,):
        return None
    return done.rank
