"""Compare a variant's outputs with eager's within a program's per-dtype tolerance.

Note: eager rounds every intermediate of a bf16 or f16 program to that dtype, a compiler keeps them
in f32, and a long chain (exp of exp, then a difference of near values) can take eager's result
further from the exact one than any tolerance for the dtype allows. Where a variant's outputs are
outside the tolerance, they are compared with the program computed in float64 too: the variant
passes if its root-mean-square error against that is at most twice eager's (plus a tenth of the
absolute tolerance), as torch's own benchmarks judge compiled models against a float64 reference.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves

from autofuse.measure.verify import compare

from .base import Program


def mismatch(program: Program, actual: Any, expected: Any,
             reference: Callable[[], Any] | None = None) -> str | None:
    """None when actual matches expected (structure, shapes, dtypes, values within the program's
    tolerance, or no further from `reference()`, the float64 outputs, than eager), else why not."""
    why = compare(actual, expected, "output", program.tolerance)
    if why is None or reference is None or "wrong values" not in why:
        return why
    if as_close_as_eager(actual, expected, reference(), program.tolerance):
        return None
    return f"{why}; further from the float64 result than eager"


def as_close_as_eager(actual: Any, expected: Any, ref: Any,
                      tolerance: Callable[[torch.dtype], tuple[float, float]]) -> bool:
    """Every floating output's RMS error against `ref` is at most twice eager's plus atol / 10."""
    for a, e, r in zip(tree_leaves(actual), tree_leaves(expected), tree_leaves(ref)):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            continue
        r = r.to(device=a.device, dtype=torch.float64)
        atol = tolerance(e.dtype)[1]
        rmse_a = (a.double() - r).pow(2).mean().sqrt().item()
        rmse_e = (e.double() - r).pow(2).mean().sqrt().item()
        if not rmse_a <= 2 * rmse_e + atol / 10:
            return False
    return True


def float64_outputs(module: torch.nn.Module, args: tuple) -> Any:
    """The program's outputs computed in float64 (a copy of the module; floating inputs cast)."""
    m = copy.deepcopy(module).double()
    with torch.no_grad():
        return m(*(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args))
