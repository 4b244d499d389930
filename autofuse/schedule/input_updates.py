"""Which input updates the kernel computing the new value can store into the input itself.

Note: AOTAutograd leaves a graph's in-place updates of its inputs (an optimizer's parameters and
moments, BatchNorm's running statistics) as `copy_(input, new)` at the end, and lower/mutation.py
runs them as one `_foreach_copy_`. That copy reads and writes every updated tensor once more: an
AdamW step (p, m, v rewritten from p, g, m, v) moves 13 tensors' bytes instead of 7. Where a
pointwise kernel computes the new value in the input's layout, reads the input at most at the
element it writes, and nothing after it reads the input, the kernel stores into the input (as
Inductor's mutated buffers do) and the update leaves the copy. A kernel that writes into its own
operand cannot be run twice on the same inputs, so the search and the compile-time autotune
measure the program with the copy; the kernels' sources are the same either way.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..ir.values import ComputedBuffer, InputBuffer
from .fusion import FusionGroup
from .in_place import reads_only_written_element
from .scheduler import SchedulerGraph

UPDATE_OP = torch.ops.aten._foreach_copy_.default


def is_update(g: FusionGroup) -> bool:
    """Is g the multi-tensor copy of a graph's input updates (lower/mutation.py)?"""
    return g.is_extern and g.nodes[0].extern.op is UPDATE_OP and not g.nodes[0].outputs


def stored_in_place(graph: SchedulerGraph, groups: Sequence[FusionGroup],
                    readers: dict[str, set[int]]) -> dict[str, str]:
    """The buffers whose kernel stores them into the input they update: buffer name -> input name."""
    group_of = {n.name: gi for gi, g in enumerate(groups) for n in g.nodes}
    updates = [gi for gi, g in enumerate(groups) if is_update(g)]
    out: dict[str, str] = {}
    for ui in updates:
        dsts, srcs = groups[ui].nodes[0].extern.args[:2]
        names = [getattr(s, "name", None) for s in srcs]
        for dst, src in zip(dsts, srcs):
            if names.count(getattr(src, "name", None)) == 1 and _legal(graph, groups, readers, group_of, ui, dst, src):
                out[src.name] = dst.name
    return out


def _legal(graph: SchedulerGraph, groups: Sequence[FusionGroup], readers: dict[str, set[int]],
           group_of: dict[str, int], ui: int, dst: Any, src: Any) -> bool:
    if not (isinstance(dst, InputBuffer) and isinstance(src, ComputedBuffer)) or src.layout != dst.layout \
            or src.is_scatter:   # a scatter adds into its target's memory, not the input's
        return False
    if src.name in graph.graph_outputs or dst.name in graph.graph_outputs or src.name not in group_of:
        return False
    gi = group_of[src.name]
    if any(r != ui and (r > gi or groups[r].is_extern) for r in readers.get(dst.name, ())):
        return False  # read after the kernel, or by an ATen op that may return a view of it
    # another element of the input may already hold its new value when this one is read
    return reads_only_written_element(groups[gi], src.name, dst.name, dst.layout)
