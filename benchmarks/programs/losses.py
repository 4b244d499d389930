"""Losses reduced with every reduction mode: MSE, L1, Huber, smooth-L1, KL-div, hinge, BCE-with-logits,
cross-entropy and NLL (mean, sum, and none: the per-element loss)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import In, Program, fn_program

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: (1e-3, 1e-4), BF16: (5e-2, 5e-2)}
REDUCTIONS = ("mean", "sum", "none")

ELEMENTWISE = {   # name -> (loss(input, target, reduction), target kind)
    "mse": (lambda x, y, r: F.mse_loss(x, y, reduction=r), "randn"),
    "l1": (lambda x, y, r: F.l1_loss(x, y, reduction=r), "randn"),
    "huber": (lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=0.7), "randn"),
    "smooth_l1": (lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.5), "randn"),
    "kl_div": (lambda x, y, r: F.kl_div(F.log_softmax(x, -1), y, reduction=r), "uniform"),
    "hinge": (lambda x, y, r: F.hinge_embedding_loss(x, y, margin=0.8, reduction=r), "sign"),
    "bce_logits": (lambda x, y, r: F.binary_cross_entropy_with_logits(x, y, reduction=r), "uniform"),
}


def _elementwise(name: str, reduction: str):
    loss = ELEMENTWISE[name][0]
    return lambda x, y: loss(x, y, reduction)


def _class(name: str, reduction: str):
    if name == "cross_entropy":
        return lambda x, t: F.cross_entropy(x, t, reduction=reduction)
    return lambda x, t: F.nll_loss(F.log_softmax(x, -1), t, reduction=reduction)


def programs() -> list[Program]:
    full, tiny = {"r": 16384, "c": 4099}, {"r": 23, "c": 57}     # 268 MB of f32 per operand
    out = []
    for name, (_, target) in ELEMENTWISE.items():
        for red in REDUCTIONS:
            out.append(fn_program(f"loss_{name}_{red}_f32", "loss", _elementwise(name, red),
                                  (In(("r", "c")), In(("r", "c"), target)), full, tiny, tolerances=TOL))
    out.append(fn_program("loss_kl_div_batchmean_f32", "loss",
                          lambda x, y: F.kl_div(F.log_softmax(x, -1), y, reduction="batchmean"),
                          (In(("r", "c")), In(("r", "c"), "uniform")), full, tiny, tolerances=TOL))
    cls, tcls = {"r": 8192, "v": 32000}, {"r": 19, "v": 301}      # 1 GB of f32 logits
    for name in ("cross_entropy", "nll"):
        for red in REDUCTIONS:
            out.append(fn_program(f"loss_{name}_{red}_f32", "loss", _class(name, red),
                                  (In(("r", "v")), In(("r",), "int", high="v")), cls, tcls, tolerances=TOL))
    out.append(fn_program("loss_mse_mean_bf16", "loss", _elementwise("mse", "mean"),
                          (In(("r", "c")), In(("r", "c"))), full, tiny, BF16, tolerances=TOL))
    out.append(fn_program("loss_cross_entropy_mean_bf16", "loss", _class("cross_entropy", "mean"),
                          (In(("r", "v")), In(("r",), "int", high="v")), cls, tcls, BF16, tolerances=TOL))
    return out
