"""Print sympy index expressions and torch dtypes as Triton source."""
from __future__ import annotations

from typing import Mapping

import sympy
import torch

from ..ir.index import FloorDiv, ModIndex

TL_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16", torch.int32: "tl.int32",
    torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
    torch.float8_e4m3fn: "tl.float8e4nv", torch.float8_e5m2: "tl.float8e5",
}


def tl_dtype(dtype: torch.dtype) -> str:
    try:
        return TL_DTYPES[dtype]
    except KeyError:
        raise NotImplementedError(f"dtype {dtype} in a Triton kernel") from None


def nonnegative(expr: sympy.Expr) -> bool:
    """Is the index expression non-negative for every value of its (non-negative) loop variables?
    Conservative: a sum or product of non-negative terms, floor-divided or reduced by a positive
    divisor."""
    if expr.is_Integer:
        return int(expr) >= 0
    if expr.is_Symbol:
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(nonnegative(a) for a in expr.args)
    if isinstance(expr, FloorDiv):
        return nonnegative(expr.args[0]) and nonnegative(expr.args[1])
    if isinstance(expr, ModIndex):
        return nonnegative(expr.args[1])   # a floored remainder takes the divisor's sign
    if isinstance(expr, sympy.Pow):
        return nonnegative(expr.base)
    return False


Bound = tuple[int | None, int | None]


def interval(expr: sympy.Expr, ranges: Mapping[sympy.Symbol, int]) -> Bound:
    """Lowest and highest value of an index expression (None where unknown); a symbol in `ranges`
    lies in [0, its range), another non-negative symbol in [0, unknown)."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        if expr in ranges:
            return 0, max(int(ranges[expr]) - 1, 0)
        return (0 if expr.is_nonnegative else None), None
    if isinstance(expr, sympy.Add):
        parts = [interval(a, ranges) for a in expr.args]
        lo = None if any(p[0] is None for p in parts) else sum(p[0] for p in parts)
        hi = None if any(p[1] is None for p in parts) else sum(p[1] for p in parts)
        return lo, hi
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if not coeff.is_Integer:
            return None, None
        factors = [interval(a, ranges) for a in sympy.Mul.make_args(rest)]
        if any(f[0] is None or f[0] < 0 for f in factors):
            return None, None
        lo, hi = 1, 1
        for f in factors:
            lo = lo * f[0]
            hi = None if hi is None or f[1] is None else hi * f[1]
        c = int(coeff)
        return (c * lo, None if hi is None else c * hi) if c >= 0 else ((None if hi is None else c * hi), c * lo)
    if isinstance(expr, (FloorDiv, ModIndex)) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
        d = int(expr.args[1])
        if isinstance(expr, ModIndex):
            return 0, d - 1
        lo, hi = interval(expr.args[0], ranges)
        return (None if lo is None else lo // d), (None if hi is None else hi // d)
    return (0, None) if nonnegative(expr) else (None, None)


def print_expr(expr: sympy.Expr, names: Mapping[sympy.Symbol, str],
               ranges: Mapping[sympy.Symbol, int] | None = None) -> str:
    """Triton text for an integer index expression; symbols are replaced by `names`, and `ranges`
    bound the kernel's index symbols (each in [0, its range)).

    Note: no `//` or `%` is printed with a dividend that may be negative where its lowest value
    is known. Triton truncates toward zero where the index arithmetic floors, and its GPU
    compiler's analysis of which offsets are contiguous or constant (AxisInfo, what decides vector
    loads) treats signed division and remainder as if the dividend were non-negative: a negative
    one is undefined there, and the interpreter, which CI runs, cannot show it. The dividend is
    shifted up by a multiple of the divisor instead; one of unknown range (an index loaded from
    memory) keeps the floored form below.
    """
    ranges = ranges or {}
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return names.get(expr, expr.name)
    if isinstance(expr, sympy.Add):
        parts = [print_expr(a, names, ranges) for a in expr.args]
        return "(" + " + ".join(parts) + ")"
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return "(-" + print_expr(rest, names, ranges) + ")"
        return "(" + " * ".join(print_expr(a, names, ranges) for a in expr.args) + ")"
    if isinstance(expr, (FloorDiv, ModIndex)):
        base, divisor = (print_expr(a, names, ranges) for a in expr.args)
        lowest = interval(expr.args[0], ranges)[0]
        if nonnegative(expr.args[0]) or (lowest is not None and lowest >= 0):
            return f"({base} {'//' if isinstance(expr, FloorDiv) else '%'} {divisor})"
        if expr.args[1].is_Integer and int(expr.args[1]) > 0 and lowest is not None:
            # b + k*d >= 0 in every lane: its truncated and floored quotients agree
            d = int(expr.args[1])
            k = -(lowest // d)
            shifted = f"({base} + {k * d})"
            return f"({shifted} % {d})" if isinstance(expr, ModIndex) else f"(({shifted} // {d}) - {k})"
        # a dividend of unknown lowest value (an index loaded from memory): with a positive divisor
        # d, ((b % d) + d) % d is the floored remainder and b minus it divides exactly
        if expr.args[1].is_Integer and int(expr.args[1]) > 0:
            mod = f"((({base} % {divisor}) + {divisor}) % {divisor})"
            return mod if isinstance(expr, ModIndex) else f"(({base} - {mod}) // {divisor})"
        return f"{'_floordiv' if isinstance(expr, FloorDiv) else '_remainder_int'}({base}, {divisor})"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        base = print_expr(expr.base, names, ranges)
        return "(" + " * ".join([base] * int(expr.exp)) + ")"
    raise NotImplementedError(f"cannot print index expression {expr!r}")
