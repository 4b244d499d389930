"""Programs drawn from a seed: a random pointwise chain on a row-major tensor with broadcast
operands, then a row or column reduction (or softmax, norm, or nothing) and a broadcast epilogue.

Note: program i of a seed depends only on (seed, i), so a larger corpus extends a smaller one.
Every op keeps values bounded (tanh/sigmoid squash, exp of a clamped value, log of abs()+1), so
programs stay finite in bf16 too. The recipe (a tuple of step names) is the program: the module
interprets it, and Dynamo unrolls it into one graph.
"""
from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program

F32, BF16 = torch.float32, torch.bfloat16
UNARY = ("tanh", "sigmoid", "silu", "relu", "exp_clamped", "log1p_abs", "square_scaled", "gelu", "neg", "abs")
BINARY = ("add_row", "mul_row", "add_col", "mul_col", "add_other", "mul_other", "max_other")
TAILS = ("sum_last", "mean_last", "amax_last", "sum_first", "softmax_last", "norm_last", "center_last", "none")
SHAPES = ((16384, 4096), (8192, 8191), (65536, 1000), (4096, 32000), (32768, 2304), (2048, 65537))
TINY = ((13, 41), (9, 77), (17, 33), (5, 301), (11, 23), (3, 1111))


class Recipe(nn.Module):
    """Applies the recipe's steps to x with the broadcast operands row [C], col [R, 1], other [R, C]."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x, row, col, other):
        for s in self.steps:
            x = _step(s, x, row, col, other)
        return x


def _step(s: str, x, row, col, other):
    if s == "tanh":
        return torch.tanh(x)
    if s == "sigmoid":
        return torch.sigmoid(x)
    if s == "silu":
        return F.silu(x)
    if s == "relu":
        return torch.relu(x)
    if s == "exp_clamped":
        return torch.exp(torch.clamp(x, -4.0, 4.0))
    if s == "log1p_abs":
        return torch.log1p(x.abs())
    if s == "square_scaled":
        return x * x * 0.25
    if s == "gelu":
        return F.gelu(x)
    if s == "neg":
        return -x
    if s == "abs":
        return x.abs()
    if s == "add_row":
        return x + row
    if s == "mul_row":
        return x * row
    if s == "add_col":
        return x + col
    if s == "mul_col":
        return x * col
    if s == "add_other":
        return x + other
    if s == "mul_other":
        return x * torch.tanh(other)
    if s == "max_other":
        return torch.maximum(x, other)
    if s == "sum_last":
        return x.float().sum(-1)
    if s == "mean_last":
        return x.mean(-1, keepdim=True) * row
    if s == "amax_last":
        return x.amax(-1)
    if s == "sum_first":
        return x.float().sum(0)
    if s == "softmax_last":
        return torch.softmax(x.float(), -1).to(x.dtype)
    if s == "norm_last":
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * row
    if s == "center_last":
        return x - x.mean(-1, keepdim=True)
    if s == "none":
        return x
    raise ValueError(s)


def draw(seed: int, i: int) -> Program:
    """Program i of seed."""
    rng = random.Random(seed * 1_000_003 + i)
    chain = [rng.choice(UNARY + BINARY) for _ in range(rng.randint(2, 5))]
    tail = rng.choice(TAILS)
    steps = tuple(chain) + (tail,) + ((rng.choice(UNARY),) if tail in ("softmax_last", "norm_last", "none") else ())
    k = rng.randrange(len(SHAPES))
    dtype = rng.choice((F32, F32, BF16))
    (r, c), (tr, tc) = SHAPES[k], TINY[k]
    tol = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2)}
    inputs = (In(("r", "c"), noncontig=rng.random() < 0.15), In(("c",)), In(("r", 1)), In(("r", "c")))
    name = f"gen_s{seed}_{i:03d}_{'_'.join(s.split('_')[0] for s in steps)}_{'bf16' if dtype == BF16 else 'f32'}"
    return Program(name, "generated", lambda s: Recipe(steps), inputs, {"r": r, "c": c}, {"r": tr, "c": tc}, dtype,
                   tol, seed=i)


def programs(n: int = 24, seed: int = 0) -> list[Program]:
    return [draw(seed, i) for i in range(n)]
