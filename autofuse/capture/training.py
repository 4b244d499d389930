"""The loss a captured training step backpropagates, when the model does not say which it is."""
from __future__ import annotations

from typing import Any

import torch


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
