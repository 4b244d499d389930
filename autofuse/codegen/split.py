"""Split reductions: a reduction whose x grid is too small to fill the GPU (a column sum, a few long
rows) cuts its r range into `split` chunks, one program per (x block, chunk).

Note: the kernel becomes two @triton.jit functions in one module. The first ("partial") runs on
grid (x blocks, split): program (x, s) reduces r in [s * chunk, (s + 1) * chunk), chunk =
ceil(rnumel / split) rounded up to a multiple of RBLOCK (exactly one RBLOCK when persistent), and
stores each reduction's partial, in the accumulator dtype, to a workspace [split, numel] (an empty
chunk stores the identity); it also stores the r-loop nodes (a prologue that is an output). The
second ("combine") runs on x blocks only: it reduces the partials along s with the same rules as
the first kernel's final step (NaN propagation included), then runs the x-loop nodes (the
epilogue: a dtype cast, a mean's division, a bias) and stores. No atomics: deterministic.
Legal when every reduction combines from partials (sum, prod, max, min, any, all) and no node in
the r loop (another reduction, a softmax's exp(x - max)) needs a reduction's value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..schedule.heuristics import next_pow2
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode

SPLITTABLE_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "any", "all"})
MAX_SPLIT = 4096


def why_not_split(members: Sequence[tuple[SchedulerNode, Placement]], is_reduction: bool) -> str | None:
    """None when a kernel of these placed nodes may split its r range, else why not — the one
    eligibility rule: plan checks, default heuristics and codegen all ask here."""
    if not is_reduction:
        return "split needs a reduction kernel"
    after: dict[str, str] = {}  # node -> the reduction whose value it needs
    for node, pl in members:
        if pl.cls == "red" and node.buffer.body.reduction_type not in SPLITTABLE_REDUCTIONS:
            return (f"reduction {node.name} is {node.buffer.body.reduction_type}, which does not combine "
                    "from partial results")
        needs = sorted(after[r] for r in node.read_names if r in after)
        if needs and pl.cls != "x":
            return (f"{node.name} reads the reduction {needs[0]} inside the r loop (each chunk would see only "
                    "a partial)")
        if pl.cls == "red":
            after[node.name] = node.name
        elif needs:
            after[node.name] = needs[0]
    return None


def split_chunk(rnumel: int, split: int, rblock: int) -> int:
    """r elements per chunk: ceil(rnumel / split) rounded up to a multiple of RBLOCK."""
    per = -(-max(rnumel, 1) // split)
    return -(-per // rblock) * rblock


def combine_xblock(numel: int, split: int, interpret: bool) -> int:
    """x block of the combine kernel: [XBLOCK, next_pow2(split)] partials per program."""
    budget = (1 << 16) if interpret else 2048
    return max(1, min(next_pow2(max(numel, 1)), budget // next_pow2(split)))


def partial_header(chunk: int, i64: str) -> list[str]:
    """Lines after the x header of the partial kernel: which chunk of r this program reduces."""
    return [f"rsplit_id = tl.program_id(1){i64}", f"rsplit_start = rsplit_id * {chunk}"]


def combine_header(split: int, i64: str) -> list[str]:
    """Lines after the x header of the combine kernel: the partials' row index and mask."""
    return [f"sindex = tl.arange(0, {next_pow2(split)})[None, :]{i64}", f"xsmask = xmask & (sindex < {split})"]


@dataclass(frozen=True)
class SplitCombine:
    """What the runtime needs for the second kernel of a split reduction."""

    name: str
    split: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    workspace_dtypes: tuple[torch.dtype, ...]  # one workspace [split, numel] per reduction, in order
    xblock: int

    @property
    def arg_names(self) -> tuple[str, ...]:
        return self.inputs + self.outputs
