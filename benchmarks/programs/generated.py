"""Programs drawn from a seed: the project's generator of memory-bound programs
(`benchmarks/corpus.py`: pointwise chains over broadcast operands, row and column reductions with
epilogues, softmax and norms, residual adds, casts and transposed operands, in f32, bf16 and f16)
as the corpus's `generated` category.

Note: the seed is one that no cost-model training export uses (`costmodel/data`), so the model
ranking their configs has not seen them. Program i of a seed depends only on (seed, i). At CPU
scale (`shrink`) a program keeps its row length and runs a few rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .. import corpus
from .base import Fn, Program

SEED = 100
SHRUNK_ELEMENTS = 4096  # elements per input at CPU scale (at least 3 rows)
TOLERANCES = {torch.float32: (1e-3, 1e-3), torch.bfloat16: (5e-2, 5e-2), torch.float16: (1e-2, 1e-2)}


@dataclass(frozen=True)
class Drawn(Program):
    """Program `index` of `corpus.program(SEED, ...)`; `make` drafts it again (a few ms on the meta
    device) and draws its inputs on the device (the `module` and `inputs` fields go unused)."""

    index: int = 0
    rows: int = 0
    cols: int = 0

    def make(self, device: str, shrink: bool = False, seed: int | None = None) -> tuple[nn.Module, tuple]:
        scale = min(1.0, (max(3, SHRUNK_ELEMENTS // max(self.cols, 1)) + 0.5) / self.rows) if shrink else 1.0
        drawn = corpus.program(SEED, self.index, scale, inputs_seed=seed)
        fn, args = drawn.build(device)
        return Fn(fn).eval(), args


def draw(index: int) -> Drawn:
    p = corpus.program(SEED, index)
    return Drawn(f"gen_{p.name}", "generated", lambda s: Fn(lambda *a: a), (), {}, {}, p.dtype, TOLERANCES,
                 index=index, rows=p.rows, cols=p.cols)


def programs(n: int = 24) -> list[Program]:
    return [draw(i) for i in range(n)]


__all__ = ["Drawn", "draw", "programs", "SEED"]
