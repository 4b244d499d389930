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


def print_expr(expr: sympy.Expr, names: Mapping[sympy.Symbol, str]) -> str:
    """Triton text for an integer index expression; symbols are replaced by `names`."""
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return names.get(expr, expr.name)
    if isinstance(expr, sympy.Add):
        parts = [print_expr(a, names) for a in expr.args]
        return "(" + " + ".join(parts) + ")"
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return "(-" + print_expr(rest, names) + ")"
        return "(" + " * ".join(print_expr(a, names) for a in expr.args) + ")"
    if isinstance(expr, (FloorDiv, ModIndex)):
        base, divisor = (print_expr(a, names) for a in expr.args)
        if nonnegative(expr.args[0]):
            return f"({base} {'//' if isinstance(expr, FloorDiv) else '%'} {divisor})"
        # Triton's // and % truncate toward zero; the index arithmetic floors (a padded view's
        # offset can make the base negative). With a positive divisor d, ((b % d) + d) % d is the
        # floored remainder and b minus it divides exactly, in plain arithmetic on any backend
        if expr.args[1].is_Integer and int(expr.args[1]) > 0:
            mod = f"((({base} % {divisor}) + {divisor}) % {divisor})"
            return mod if isinstance(expr, ModIndex) else f"(({base} - {mod}) // {divisor})"
        return f"{'_floordiv' if isinstance(expr, FloorDiv) else '_remainder_int'}({base}, {divisor})"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        base = print_expr(expr.base, names)
        return "(" + " * ".join([base] * int(expr.exp)) + ")"
    raise NotImplementedError(f"cannot print index expression {expr!r}")
