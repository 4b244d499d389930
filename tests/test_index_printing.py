"""Index expressions printed as Triton source (codegen/printer.py): floored division and remainder of
a dividend that may be negative come out equal to sympy's, and no `//` or `%` of the printed text
ever sees a negative dividend (Triton's GPU compiler analyses signed division as if it could not)."""
from __future__ import annotations

import itertools
import random

import pytest
import sympy

from autofuse.codegen.printer import interval, print_expr
from autofuse.ir.index import FloorDiv, ModIndex

X = sympy.Symbol("xindex", integer=True, nonnegative=True)
R = sympy.Symbol("rindex", integer=True, nonnegative=True)


class Lane(int):
    """An int whose // and % truncate toward zero, as Triton's do, and refuse a negative dividend."""

    def __add__(self, o): return Lane(int(self) + int(o))
    __radd__ = __add__
    def __sub__(self, o): return Lane(int(self) - int(o))
    def __rsub__(self, o): return Lane(int(o) - int(self))
    def __mul__(self, o): return Lane(int(self) * int(o))
    __rmul__ = __mul__
    def __neg__(self): return Lane(-int(self))

    def __floordiv__(self, o):
        assert int(self) >= 0, f"// of a negative dividend {int(self)}"
        return Lane(int(self) // int(o))

    def __mod__(self, o):
        assert int(self) >= 0, f"% of a negative dividend {int(self)}"
        return Lane(int(self) % int(o))


def _check(expr: sympy.Expr, ranges: dict) -> None:
    text = print_expr(expr, {}, ranges)
    syms = sorted(ranges, key=str)
    lo, hi = interval(expr, ranges)
    for point in itertools.product(*(range(ranges[s]) for s in syms)):
        env = {str(s): Lane(v) for s, v in zip(syms, point)}
        want = int(expr.subs(dict(zip(syms, point))))
        assert int(eval(text, {}, env)) == want, (text, point)   # noqa: S307 - the printer's own text
        assert (lo is None or lo <= want) and (hi is None or want <= hi), (expr, lo, hi, want)


def test_relative_shift_offsets():
    """funnel's relative-shift attention: a remainder and a quotient of bases that start below zero."""
    base = -12 + 12 * ModIndex(R + 23 * X, 2) + 24 * FloorDiv(1 + FloorDiv(R + 23 * X, 12), 2) + R
    ranges = {X: 12, R: 12}
    _check(ModIndex(base, 23), ranges)
    _check(FloorDiv(base - ModIndex(base, 23), 23), ranges)
    text = print_expr(ModIndex(base, 23), {}, ranges)
    assert "% 23) + 23) % 23" not in text and text.endswith("+ 23) % 23)")   # shifted once, not ((b % d) + d) % d


@pytest.mark.parametrize("seed", range(40))
def test_random_divisions(seed):
    rng = random.Random(seed)
    ranges = {X: rng.randint(1, 9), R: rng.randint(1, 7)}

    def term(depth: int) -> sympy.Expr:
        pick = rng.random()
        if depth == 0 or pick < 0.3:
            return rng.choice([X, R, sympy.Integer(rng.randint(-20, 20))])
        if pick < 0.55:
            return term(depth - 1) + term(depth - 1)
        if pick < 0.7:
            return rng.choice([-3, -1, 2, 5]) * term(depth - 1)
        cls = FloorDiv if pick < 0.85 else ModIndex
        return cls(term(depth - 1), sympy.Integer(rng.randint(2, 9)))

    expr = FloorDiv(term(3) - rng.randint(0, 30), sympy.Integer(rng.randint(2, 7)))
    _check(expr, ranges)
    _check(ModIndex(term(3) - rng.randint(0, 30), sympy.Integer(rng.randint(2, 7))), ranges)
