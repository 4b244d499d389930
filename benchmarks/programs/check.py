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

from autofuse.measure.verify import check_outputs

from .base import Program
from .train import Step


def mismatch(program: Program, actual: Any, expected: Any,
             reference: Callable[[], Any] | None = None) -> str | None:
    """None when actual matches expected (structure, shapes, dtypes, values within the program's
    tolerance, or no further from `reference()`, the float64 outputs, than eager), else why not."""
    return check_outputs(actual, expected, reference, "output", program.tolerance)


def float64_outputs(module: torch.nn.Module, args: tuple, program: Program | None = None) -> Any:
    """The program's outputs computed in float64 (a copy of the module; floating inputs cast); for
    a train program, its training step's outputs and gradients (the same output gradients)."""
    m = copy.deepcopy(module).double()
    args64 = tuple(_double(a) for a in args)
    if program is not None and program.train:
        return Step(m, m, program)(*args64)
    with torch.no_grad():
        return m(*args64)


def _double(a: Any) -> Any:
    """A float64 leaf of a floating input (requiring grad where the input does)."""
    if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
        return a
    return a.detach().double().requires_grad_(a.requires_grad)
