"""Seeded classification-loss programs at language-model and classifier sizes: the cost model's
training data for the kernels a loss compiles to.

    losses(n, seed=0, scale=1.0) -> list[Program]

Why a family of its own: the random corpus (benchmarks/corpus.py) drafts row reductions, norms and
pointwise chains but no gather, so a loss's final kernel — one program (or a few, split) reducing a
batch's per-row terms, each fetched by a gather at the row's target — had no neighbour in the
training data. Without them a model trained on the corpus puts the one-program configs of
cross-entropy's 1 x 8192 loss reduction at 6-8 µs; they measure 15-35, and the split ones it ranks
low are the fastest (8.2 µs; docs/costmodel.md). The corpus's random stream is left as it
is (its programs are named by seed and index, and exports collected from it must stay reproducible),
so the losses are drawn from a stream of their own.

Each program: logits of V classes (1000 - 128256) over R rows in f32, bf16 or f16, sized so the
logits fill 16 MB - 512 MB; a loss drawn from cross-entropy (on the logits or upcast to f32, as
mixed-precision training does), log_softmax + nll_loss, cross-entropy with label smoothing and
cross-entropy with ignored targets (-100), each reduced by mean, sum or none. Program i of a seed
depends only on (seed, i); `scale` shrinks the rows only (same program, same name).
"""
from __future__ import annotations

import random
from functools import partial
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .corpus import DTYPES, MAX_BYTES, MIN_BYTES, SHORT, Program

VOCABS = (1000, 4096, 8192, 11008, 32000, 32768, 50257, 128256)
KINDS = ("ce", "ce_f32", "nll", "smooth", "ignore")
REDUCTIONS = ("mean", "mean", "sum", "none")   # mean is what training uses
IGNORE = -100


def _loss(kind: str, reduction: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if kind == "ce":
        return lambda x, t: F.cross_entropy(x, t, reduction=reduction)
    if kind == "ce_f32":
        return lambda x, t: F.cross_entropy(x.float(), t, reduction=reduction)
    if kind == "nll":
        return lambda x, t: F.nll_loss(F.log_softmax(x.float(), -1), t, reduction=reduction)
    if kind == "smooth":
        return lambda x, t: F.cross_entropy(x.float(), t, reduction=reduction, label_smoothing=0.1)
    if kind == "ignore":
        return lambda x, t: F.cross_entropy(x.float(), t, reduction=reduction, ignore_index=IGNORE)
    raise ValueError(f"unknown loss kind {kind!r}")


def _build(kind: str, reduction: str, dtype: torch.dtype, rows: int, vocab: int, seed: int,
           device: str) -> tuple[Callable[..., Any], tuple]:
    if device == "meta":
        logits = torch.empty((rows, vocab), dtype=dtype, device="meta")
        target = torch.empty((rows,), dtype=torch.int64, device="meta")
    else:
        gen = torch.Generator().manual_seed(seed)
        logits = (torch.randn((rows, vocab), generator=gen) * 2.0).to(device=device, dtype=dtype)
        target = torch.randint(0, vocab, (rows,), generator=gen)
        if kind == "ignore":  # about one row in eight is padding
            target[torch.rand((rows,), generator=gen) < 0.125] = IGNORE
        target = target.to(device)
    return _loss(kind, reduction), (logits, target)


def loss_program(seed: int, index: int, scale: float = 1.0) -> Program:
    """Program `index` of a seed's losses."""
    rng = random.Random(f"autofuse-losses:{seed}:{index}")
    kind, reduction, dtype, vocab = (rng.choice(KINDS), rng.choice(REDUCTIONS), rng.choice(DTYPES),
                                     rng.choice(VOCABS))
    if kind == "ce_f32" and dtype == torch.float32:
        kind = "ce"
    size = dtype.itemsize * vocab
    lo, hi = max(1, -(-MIN_BYTES // size)), MAX_BYTES // size
    # rows: a power of two half the time (batch x sequence), else any count in range
    pow2 = [1 << k for k in range(lo.bit_length() - 1, hi.bit_length()) if lo <= 1 << k <= hi]
    rows = rng.choice(pow2) if pow2 and rng.random() < 0.5 else rng.randint(lo, hi)
    name = f"l{seed}_{index:04d}_{SHORT[dtype]}_{rows}x{vocab}_{kind}_{reduction}"
    source = f"logits: {SHORT[dtype]} ({rows}, {vocab}); target: i64 ({rows},)\nloss = {kind}, reduction={reduction}"
    build = partial(_build, kind, reduction, dtype, max(1, int(rows * scale)), vocab, seed * 1_000_003 + index)
    return Program(name, build, source, vocab, ("loss", kind, reduction))


def losses(n: int, seed: int = 0, scale: float = 1.0) -> list[Program]:
    """n seeded loss programs; scale multiplies the row count."""
    return [loss_program(seed, i, scale) for i in range(n)]
