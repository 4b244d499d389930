"""The operations a lazy body may use, and the handlers that interpret bodies.

Note: a body is a plain Python function `(ops, index) -> value`. The same body is run by
different handlers: `AnalysisHandler` records reads (for MemoryDeps) and counts ops (for the
realize heuristics); the Triton codegen handler emits code. Math ops are called by name
(`ops.add(a, b)`); operands are already cast to one compute dtype by the lowering.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

import sympy
import torch

from .index import Expr

# op name -> result dtype rule: "same" (first operand), "bool", "arg1" (second operand), "float32"
MATH_OPS: dict[str, str] = {
    **{n: "same" for n in (
        "add", "sub", "mul", "truediv", "div_rn", "floordiv", "truncdiv", "remainder", "fmod", "neg", "abs",
        "sign", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
        "cos", "tan", "tanh", "sigmoid", "erf", "pow", "floor", "ceil", "round", "trunc", "maximum",
        "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "relu", "atan", "asin",
        "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma", "lshift", "rshift", "atan2", "hypot", "fma")},
    **{n: "bool" for n in (
        "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_xor", "logical_not",
        "isnan", "isinf", "signbit")},
    "where": "arg1",
    "rand": "float32",   # rand(seed, offset): Philox's uniform float of element `offset` (capture/random_ops.py)
    "randn": "float32",  # randn(seed, offset): its standard normal float
}


def result_dtype(name: str, dtypes: Sequence[torch.dtype | None]) -> torch.dtype | None:
    """The dtype math op `name` returns for operands of these dtypes (MATH_OPS's rule)."""
    rule = MATH_OPS[name]
    if rule == "same":
        return dtypes[0]
    if rule == "arg1":
        return dtypes[1]
    return torch.bool if rule == "bool" else torch.float32


class OpsHandler:
    """Base of body interpreters. Subclasses implement the primitive methods."""

    def load(self, name: str, index: Expr) -> object:
        raise NotImplementedError

    def constant(self, value: float | int | bool, dtype: torch.dtype) -> object:
        raise NotImplementedError

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> object:
        raise NotImplementedError

    def to_dtype(self, value: object, dtype: torch.dtype) -> object:
        raise NotImplementedError

    def masked(self, mask: object, body: Callable[[], object], other: float | int | bool) -> object:
        """body() evaluated where mask holds (its loads masked), `other` elsewhere."""
        raise NotImplementedError

    def indirect(self, value: object, size: int) -> sympy.Symbol:
        """A symbol standing for an integer tensor value used inside an index (wrapped if negative)."""
        raise NotImplementedError

    def op(self, name: str, *args: object) -> object:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Callable[..., object]:
        if name in MATH_OPS:
            return lambda *args: self.op(name, *args)
        raise AttributeError(name)


class AnalysisHandler(OpsHandler):
    """Records every load (buffer, index), counts ops and names the math ops used, without
    generating code.

    Note: the count is of distinct operations, as Inductor's `inner_fn_opcount` counts them: each op
    returns an id for the op and its operands' ids, and an op already seen (a lazy value read by
    several consumers inside one expression, `where(x > 0, x, 0.1 * x)` of an `exp`) counts once.
    Counted per use, a chain whose values are each read two or three times reads as several times
    its size, and the realize rule (`Heuristics.should_realize`) stored values Inductor inlines and
    inlined the ones it stores."""

    _ids = itertools.count()

    def __init__(self) -> None:
        self.loads: list[tuple[str, Expr]] = []
        self.masked_loads: set[tuple[str, Expr]] = set()     # loads inside a masked() body
        self.unmasked_loads: set[tuple[str, Expr]] = set()   # loads outside one
        self._masked_depth = 0
        self.op_names: set[str] = set()
        self.indirect_symbols: list[sympy.Symbol] = []
        self._ids_of: dict[tuple, int] = {}   # op and operand ids -> this value's id

    @property
    def op_count(self) -> int:
        return len(self._ids_of)

    def _count(self, key: tuple) -> int:
        """The value's id (operands are ids, so keys stay flat however deep the expression)."""
        return self._ids_of.setdefault(key, len(self._ids_of))

    def load(self, name: str, index: Expr) -> object:
        self.loads.append((name, index))
        (self.masked_loads if self._masked_depth else self.unmasked_loads).add((name, index))
        return self._count(("load", name, index))

    def constant(self, value, dtype) -> object:
        return self._count(("constant", value, dtype))

    def index_expr(self, expr, dtype) -> object:
        return self._count(("index_expr", expr, dtype))

    def to_dtype(self, value, dtype) -> object:
        return self._count(("to_dtype", value, dtype))

    def masked(self, mask, body, other) -> object:
        self._masked_depth += 1
        try:
            value = body()
        finally:
            self._masked_depth -= 1
        return self._count(("masked", mask, value, other))

    def indirect(self, value, size) -> sympy.Symbol:
        sym = sympy.Symbol(f"ind{next(self._ids)}", integer=True)
        self.indirect_symbols.append(sym)
        return sym

    def op(self, name, *args) -> object:
        self.op_names.add(name)
        return self._count((name, *args))

    @property
    def num_reads(self) -> int:
        """Distinct loads, a buffer read at two positions counted twice (Inductor's `num_reads`):
        a window over one buffer reads as the nine loads a 3x3 max pool issues."""
        return len(set(self.loads))

    @property
    def read_names(self) -> list[str]:
        return list(dict.fromkeys(n for n, _ in self.loads))


def analyze(fn: Callable[..., object], *index_args: Sequence[Expr]) -> AnalysisHandler:
    h = AnalysisHandler()
    fn(h, *index_args)
    return h
