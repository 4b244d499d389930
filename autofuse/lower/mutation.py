"""In-place updates of graph inputs that AOTAutograd keeps in the graph: one multi-tensor copy.

Note: with `keep_inference_input_mutations` AOTAutograd leaves a data-only update of an input
that needs no grad (BatchNorm's running mean, variance and batch count in training, a buffer a
model writes) in the graph as `copy_(input, new_value)` just before the output, instead of
returning the new value for its runtime wrapper to copy, one `copy_` call per input after every
call (159 per ResNet-50 training step). Here each such copy is collected while the graph is
lowered, and all of them run as one `_foreach_copy_` per dtype after everything else (one
multi-tensor launch each: ATen copies a list of mixed dtypes one tensor at a time). A
`copy_` into something other than a whole input, or one that another node follows (a read of
the input after its update), runs as the ATen op where it stands.
"""
from __future__ import annotations

import torch

from ..ir.values import InputBuffer, is_tensor_value
from .registry import Unsupported, register

aten = torch.ops.aten


def _trailing(node: torch.fx.Node) -> bool:
    """Only other input updates and the output follow `node`, and nothing reads its result."""
    if node.users:
        return False
    n = node.next
    while n.op != "output":
        if not (n.op == "call_function" and n.target is aten.copy_.default and not n.users):
            return False
        n = n.next
    return True


@register(aten.copy_)
def _copy_into_input(g, dst, src, non_blocking=False):
    if not (isinstance(dst, InputBuffer) and is_tensor_value(src)) or tuple(src.size) != tuple(dst.layout.size) \
            or src.dtype != dst.layout.dtype or src.device != dst.layout.device or not _trailing(g.node):
        raise Unsupported("an update of something other than a whole input at the end of the graph")
    g.input_updates.append((dst, src))
    return src
