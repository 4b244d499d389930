"""Value ranges of a kernel's index arithmetic: what an indirect index is known to lie within.

Note: an index read from a value (a gather, a resize's source position) is wrapped when negative and
takes the dtype it was computed in, int64 where the graph casts to int64. Inductor bounds such values
and drops what their range makes useless; so does this. A value computed from the loop indices and
constants only (a resize's `(dst + 0.5) * scale - 0.5`, clamped and truncated) gets an inclusive
(lo, hi) range: exact for integer ops, widened by a relative 2^-20 per float op so float32 rounding
stays inside it. `indirect` then skips the wrap when the range lies in [0, size) and narrows an
int64 value to int32 where the kernel indexes in int32. Ops without a rule give no range (loads,
divisions, transcendental functions): their values keep the wrap.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

Range = tuple[float, float]

FLOAT_SLACK = 2.0 ** -20
EXACT_IN = {torch.float32: 2 ** 24, torch.float64: 2 ** 53, torch.float16: 2 ** 11, torch.bfloat16: 2 ** 8}


def _widen(r: Range, dtype: torch.dtype) -> Range:
    if not dtype.is_floating_point:
        return r
    lo, hi = r
    return lo - (abs(lo) + 1.0) * FLOAT_SLACK, hi + (abs(hi) + 1.0) * FLOAT_SLACK


def _fits(r: Range, dtype: torch.dtype) -> bool:
    if dtype == torch.bool:
        return False
    if dtype.is_floating_point:   # past the dtype's largest finite value the value is inf
        return -torch.finfo(dtype).max <= r[0] and r[1] <= torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    return info.min <= r[0] and r[1] <= info.max


def op_range(name: str, args: Sequence[Range | None], dtype: torch.dtype) -> Range | None:
    """The range of math op `name` (ir/ops.py) on operands of these ranges, None when unknown."""
    if name == "where":
        a, b = args[1], args[2]
        if a is None or b is None:
            return None
        r = (min(a[0], b[0]), max(a[1], b[1]))
    elif name == "bitwise_and" and not dtype.is_floating_point and dtype != torch.bool:
        # an integer and a non-negative one lies in [0, that one's largest]: a remainder by a power
        # of two (`i & 4095`, a wrapped gather index) needs no wrap after it
        highs = [a[1] for a in args if a is not None and a[0] >= 0]
        if not highs:
            return None
        r = (0.0, min(highs))
    elif any(a is None for a in args):
        return None
    elif name in ("add", "sub"):
        (a0, a1), (b0, b1) = args  # type: ignore[misc]
        r = (a0 + b0, a1 + b1) if name == "add" else (a0 - b1, a1 - b0)
    elif name == "mul":
        (a0, a1), (b0, b1) = args  # type: ignore[misc]
        products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        r = (min(products), max(products))
    elif name in ("maximum", "minimum"):
        (a0, a1), (b0, b1) = args  # type: ignore[misc]
        r = (max(a0, b0), max(a1, b1)) if name == "maximum" else (min(a0, b0), min(a1, b1))
    elif name == "neg":
        r = (-args[0][1], -args[0][0])  # type: ignore[index]
    elif name in ("floor", "trunc", "ceil"):
        f = {"floor": math.floor, "trunc": math.trunc, "ceil": math.ceil}[name]
        r = (float(f(args[0][0])), float(f(args[0][1])))  # type: ignore[index]
    else:
        return None
    r = _widen(r, dtype)
    return r if _fits(r, dtype) else None


COMPARISONS = {"lt": lambda a, b: (a[1] < b[0], a[0] >= b[1]), "le": lambda a, b: (a[1] <= b[0], a[0] > b[1]),
               "gt": lambda a, b: (a[0] > b[1], a[1] <= b[0]), "ge": lambda a, b: (a[0] >= b[1], a[1] < b[0]),
               "eq": lambda a, b: (a[0] == a[1] == b[0] == b[1], a[1] < b[0] or b[1] < a[0]),
               "ne": lambda a, b: (a[1] < b[0] or b[1] < a[0], a[0] == a[1] == b[0] == b[1])}


def comparison_truth(name: str, a: Range | None, b: Range | None) -> bool | None:
    """The value of comparison `name` on every pair of operands in ranges a and b, None when the
    ranges do not decide it. Why: a pooling window's bound checks on an index that cannot leave
    the tensor (`x % 13 < 13`) are then constants, and the masks built from them fold away."""
    if a is None or b is None or name not in COMPARISONS:
        return None
    always, never = COMPARISONS[name](a, b)
    return True if always else (False if never else None)


def fold(name: str, known: Sequence[bool | None], ranges: Sequence[Range | None],
         dtypes: Sequence[torch.dtype]) -> tuple[str, int | bool] | None:
    """What decides math op `name` before it runs, from its operands' known truths and ranges:
    ("arg", k) where its value is operand k's (a select on a known condition, a logical op with one
    operand known), ("truth", t) where it is a known boolean, None where it must be computed. Code
    generation emits the folded value; `ir/dependence.py` reads which indices it still depends on."""
    if name == "where" and known[0] is not None and dtypes[1] == dtypes[2]:
        return ("arg", 1 if known[0] else 2)
    if name in ("logical_and", "logical_or", "bitwise_and", "bitwise_or") and all(d == torch.bool for d in dtypes):
        short = name.endswith("or")   # the value that decides: True for or, False for and
        for k, v in enumerate(known):
            if v is short:
                return ("truth", short)
            if v is not None:
                return ("arg", 1 - k)
        return None
    if name == "logical_not" and known[0] is not None:
        return ("truth", not known[0])
    if len(ranges) == 2:
        truth = comparison_truth(name, ranges[0], ranges[1])
        if truth is not None:
            return ("truth", truth)
    return None


def cast_range(r: Range | None, src: torch.dtype, dst: torch.dtype) -> Range | None:
    """The range after a cast: a float to an integer truncates toward zero."""
    if r is None or dst == torch.bool or src == torch.bool:
        return None
    if src.is_floating_point and not dst.is_floating_point:
        r = (float(math.trunc(r[0])), float(math.trunc(r[1])))
    elif dst.is_floating_point and max(abs(r[0]), abs(r[1])) > EXACT_IN.get(dst, 0):
        r = _widen(r, dst)
    return r if _fits(r, dst) else None
