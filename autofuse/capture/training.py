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
