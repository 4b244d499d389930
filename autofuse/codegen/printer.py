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
    if isinstance(expr, FloorDiv):
        return f"({print_expr(expr.args[0], names)} // {print_expr(expr.args[1], names)})"
    if isinstance(expr, ModIndex):
        return f"({print_expr(expr.args[0], names)} % {print_expr(expr.args[1], names)})"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        base = print_expr(expr.base, names)
        return "(" + " * ".join([base] * int(expr.exp)) + ")"
    raise NotImplementedError(f"cannot print index expression {expr!r}")
