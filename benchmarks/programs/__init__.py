"""The broad corpus: memory-bound and conv/GEMM+epilogue programs at the sizes users run.

    PROGRAMS: list[Program]     categories() -> list[str]     select(only, names, max_programs)

Each program is an nn.Module with its inputs (`Program.make(device, shrink)`), a name, a
category and per-dtype tolerances; `shrink=True` gives CPU sizes (hundreds to thousands of
elements). A train program (`Program.train`, the `training` family) runs as a training step:
forward and backward, its outputs and gradients compared (`train.py`). Hand-written families
cover the categories; `generated` adds programs drawn from a seed. Run it with
`python3 -m benchmarks.programs --out DIR` (see `runner.py`).
"""
from __future__ import annotations

from . import (blocks, chains, convgemm, generated, layers, losses, norms, pointwise, reductions, singles,
               training)
from .base import In, Program

PROGRAMS: list[Program] = (reductions.programs() + losses.programs() + norms.programs() + pointwise.programs()
                           + convgemm.programs() + chains.programs() + singles.programs() + layers.programs()
                           + blocks.programs() + training.programs() + generated.programs())


def categories() -> list[str]:
    return list(dict.fromkeys(p.category for p in PROGRAMS))


def select(only: list[str] | None = None, names: list[str] | None = None,
           max_programs: int | None = None) -> list[Program]:
    """Programs of the given categories, interleaved across categories so that a run cut short by
    --max-programs or a time budget still covers every category; named programs in the order
    named (the caller's priority). An unknown name raises ValueError."""
    if names:
        by_name = {p.name: p for p in PROGRAMS}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise ValueError(f"unknown programs: {' '.join(unknown)} (list them with --list)")
        picked = [by_name[n] for n in dict.fromkeys(names) if not only or by_name[n].category in only]
        return picked[:max_programs] if max_programs else picked
    picked = [p for p in PROGRAMS if not only or p.category in only]
    by_cat: dict[str, list[Program]] = {}
    for p in picked:
        by_cat.setdefault(p.category, []).append(p)
    order: list[Program] = []
    queues = list(by_cat.values())
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order[:max_programs] if max_programs else order


__all__ = ["PROGRAMS", "Program", "In", "categories", "select"]
