"""Which loop indices a lazy value depends on.

Note: a value is constant along a dim when nothing it computes reads that dim's index. Index
arithmetic that value ranges decide is folded first, as code generation folds it (`ranges.fold`),
so it reads nothing: transformers builds an attention mask from a padding mask as
`padding[b, k] & (q >= 0)` over [B, 1, Q, K], and `q >= 0` holds for every query position, so the
mask is constant along Q.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import sympy
import torch

from .index import Expr, bounds, make_vars
from .ops import OpsHandler, result_dtype
from .ranges import Range, cast_range, comparison_truth, fold, op_range


class _Value(NamedTuple):
    symbols: frozenset[sympy.Symbol]   # loop indices the value reads
    dtype: torch.dtype | None          # None: a load's (the handler does not know buffers' dtypes)
    range: Range | None = None
    truth: bool | None = None          # a boolean known for every index


class DependenceHandler(OpsHandler):
    """Interprets a body into the loop indices each value reads, folding what ranges decide."""

    _ids = itertools.count()

    def __init__(self, sizes: Mapping[sympy.Symbol, int]) -> None:
        self.sizes = dict(sizes)
        self.indirect_reads: dict[sympy.Symbol, frozenset[sympy.Symbol]] = {}

    def _reads(self, expr: Expr) -> frozenset[sympy.Symbol]:
        out: set[sympy.Symbol] = set()
        for s in sympy.sympify(expr).free_symbols:
            out |= self.indirect_reads.get(s, {s})
        return frozenset(out)

    def load(self, name: str, index: Expr) -> _Value:
        return _Value(self._reads(index), None)

    def constant(self, value: float | int | bool, dtype: torch.dtype) -> _Value:
        if dtype == torch.bool:
            return _Value(frozenset(), dtype, truth=bool(value))
        finite = math.isfinite(float(value))
        return _Value(frozenset(), dtype, (float(value), float(value)) if finite else None)

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> _Value:
        b = bounds(sympy.sympify(expr), self.sizes)
        r = cast_range(None if b is None else (float(b[0]), float(b[1])), torch.int64, dtype)
        return _Value(self._reads(expr), dtype, r)

    def to_dtype(self, value: _Value, dtype: torch.dtype) -> _Value:
        if dtype == torch.bool:
            truth = value.truth if value.truth is not None else comparison_truth("ne", value.range, (0.0, 0.0))
            return _Value(frozenset() if truth is not None else value.symbols, dtype, truth=truth)
        if value.truth is not None:
            return self.constant(int(value.truth), dtype)
        src = value.dtype
        return _Value(value.symbols, dtype, None if src is None else cast_range(value.range, src, dtype))

    def masked(self, mask: _Value, body: Callable[[], _Value], other: float | int | bool) -> _Value:
        result = body()
        if mask.truth is True:
            return result
        if mask.truth is False:
            return self.constant(other, result.dtype) if result.dtype is not None else _Value(frozenset(), None)
        return _Value(mask.symbols | result.symbols, result.dtype)

    def indirect(self, value: _Value, size: int) -> sympy.Symbol:
        sym = sympy.Symbol(f"dep{next(self._ids)}", integer=True)
        self.indirect_reads[sym] = value.symbols
        return sym

    def op(self, name: str, *args: _Value) -> _Value:
        decided = fold(name, [a.truth for a in args], [a.range for a in args], [a.dtype for a in args])
        if decided is not None:
            kind, v = decided
            return args[int(v)] if kind == "arg" else _Value(frozenset(), torch.bool, truth=bool(v))
        dtype = result_dtype(name, [a.dtype for a in args])
        r = None if dtype is None or any(a.dtype is None for a in args) else \
            op_range(name, [a.range for a in args], dtype)
        return _Value(frozenset().union(*(a.symbols for a in args)), dtype, r)


def constant_dims(inner_fn: Callable[..., Any], size: Sequence[int]) -> tuple[int, ...]:
    """The dims of more than one element that a body over `size` does not read the index of."""
    idx = make_vars("i", len(size))
    out = inner_fn(DependenceHandler(dict(zip(idx, (int(s) for s in size)))), idx)
    reads = out.symbols if isinstance(out, _Value) else frozenset(idx)
    return tuple(d for d, v in enumerate(idx) if int(size[d]) > 1 and v not in reads)
