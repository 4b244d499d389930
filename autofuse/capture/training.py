"""What a captured training step needs beyond its graphs: the loss it backpropagates when the model
does not say which, and where the forward graph's saved activations begin among its outputs."""
from __future__ import annotations

from typing import Any

import torch
from torch._guards import TracingContext

from ..lower.graph import SAVED_FROM


class NothingToTrain(ValueError):
    """The model's output has nothing a backward pass could start from."""


def training_loss(out: Any) -> torch.Tensor:
    """A scalar to run the backward of one training step from: the output's loss when it has one
    (a `ModelOutput.loss`, a scalar output), else the sum of every differentiable output. The
    backward graph takes a gradient for each differentiable output whichever of them the loss
    uses (unused ones get zeros), so any of these captures the graph a training loop runs."""
    from torch.utils._pytree import tree_leaves
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.requires_grad and loss.dim() == 0:
        return loss
    leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if not leaves:
        raise NothingToTrain("the model's output has no tensor that requires grad: nothing to train "
                             "(are its parameters frozen, or does it run under no_grad?)")
    return sum(t.float().sum() for t in leaves)


def mark_saved_outputs(gm: torch.fx.GraphModule) -> None:
    """Record where a training forward graph's saved activations begin among its outputs.

    Why: those outputs reach only the backward graph, which is compiled for the strides it is
    handed, so the lowering may return them in the layout it computed them in (channels-last
    activations between convolutions) instead of copying each back to eager's strides, and the
    backward's convolutions then read them channels-last too (Inductor does the same). Nothing is
    marked where AOTAutograd's metadata is missing or the graph carries tensor subclasses."""
    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    start = getattr(meta, "num_forward", None)
    out_meta = getattr(meta, "subclass_fw_graph_out_meta", None) or []
    if not isinstance(start, int) or any(type(m).__name__ == "SubclassCreationMeta" for m in out_meta):
        return
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    output.meta[SAVED_FROM] = start


# reductions whose gradient goes to the elements equal to the result: the backward compares the
# reduction's input with the saved result
_TIE_REDUCTIONS = (torch.ops.aten.amax.default, torch.ops.aten.amin.default,
                   torch.ops.aten.max.default, torch.ops.aten.min.default)


def save_compared_inputs(joint: torch.fx.GraphModule) -> None:
    """Mark the input of every amax / amin (and full max / min) of a joint graph as saved, never
    recomputed in the backward.

    Note: their backward divides the gradient among the input elements equal to the saved result
    (`x == amax(x)`, counted). Recomputed in the backward by another kernel, `x` can round
    differently (a division contracted otherwise, the GPU's other instruction order): no element
    equals the saved maximum any more, the count is 0 and the gradient NaN. The min-cut partition
    recomputes such cheap pointwise inputs by default (torch.compile's Inductor does, and gets
    NaN gradients on such a graph on the GPU). Saved, the compared values are the ones reduced."""
    from torch.utils.checkpoint import CheckpointPolicy
    for n in joint.graph.nodes:
        if n.op == "call_function" and n.target in _TIE_REDUCTIONS and n.args:
            x = n.args[0]
            if isinstance(x, torch.fx.Node) and x.op == "call_function":
                x.meta["recompute"] = CheckpointPolicy.MUST_SAVE
