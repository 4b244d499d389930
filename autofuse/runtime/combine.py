"""Consecutive independent small pointwise launches of a program merged into combo launches
(codegen/combo.py says why and which)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..codegen.combo import (COMBO_MAX_ARGS, COMBO_MAX_NUMEL, COMBO_MAX_PARTS, ComboPart, combinable, combo_source,
                             split_kernel)
from .loader import load_kernel
from .steps import Alloc, KernelLaunch


@dataclass(frozen=True)
class LaunchIO:
    """What a launch reads and writes (slots), and its kernel's source and function name."""

    reads: frozenset[int]
    writes: frozenset[int]
    source: str
    fn_name: str


def _candidate(step: Any, io: dict[int, LaunchIO]) -> bool:
    info = io.get(id(step))
    return (isinstance(step, KernelLaunch) and info is not None and not step.is_reduction and step.split == 1
            and not step.yblock and 0 < step.numel <= COMBO_MAX_NUMEL and combinable(info.source, info.fn_name))


def combine_launches(steps: Sequence[Any], io: dict[int, LaunchIO]) -> list[Any]:
    """steps with runs of combinable launches merged; allocations without reused storage inside a run
    move ahead of it. A launch joins the current combo only if it touches nothing the combo writes
    and writes nothing the combo touches (the parts run in any order)."""
    out: list[Any] = []
    combo: list[KernelLaunch] = []
    hoisted: list[Alloc] = []

    def flush() -> None:
        out.extend(hoisted)
        hoisted.clear()
        if len(combo) == 1:
            out.append(combo[0])
        elif combo:
            out.append(_merged(combo, io))
        combo.clear()

    for step in steps:
        if isinstance(step, Alloc) and step.reuse is None and combo:
            hoisted.append(step)
            continue
        if not _candidate(step, io):
            flush()
            out.append(step)
            continue
        if combo and not _joins(step, combo, io):
            flush()
        combo.append(step)
    flush()
    return out


def _joins(step: KernelLaunch, combo: list[KernelLaunch], io: dict[int, LaunchIO]) -> bool:
    me = io[id(step)]
    first = io[id(combo[0])]
    if len(combo) >= COMBO_MAX_PARTS or sum(len(s.arg_slots) for s in combo) + len(step.arg_slots) > COMBO_MAX_ARGS:
        return False
    if step.device != combo[0].device or _prelude(me) != _prelude(first):
        return False
    for other in combo:
        o = io[id(other)]
        if me.writes & (o.reads | o.writes) or me.reads & o.writes:
            return False
    return True


def _prelude(io: LaunchIO) -> str:
    return split_kernel(io.source, io.fn_name)[0]


def _merged(combo: list[KernelLaunch], io: dict[int, LaunchIO]) -> KernelLaunch:
    parts = [ComboPart(io[id(s)].fn_name, io[id(s)].source, len(s.arg_slots), s.numel, s.xblock) for s in combo]
    first = io[id(combo[0])]
    name, source = combo_source(parts, _prelude(first))
    fn = load_kernel(name, source, torch.device(combo[0].device).type != "cuda")
    programs = sum(p.programs for p in parts)
    return KernelLaunch("+".join(s.name for s in combo), fn, tuple(a for s in combo for a in s.arg_slots), programs, 1,
                        1, 1, max(s.num_warps for s in combo), max(s.num_stages for s in combo), False,
                        device=combo[0].device, arg_dtypes=tuple(d for s in combo for d in s.arg_dtypes))
