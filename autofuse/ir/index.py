"""Index arithmetic on sympy expressions: exact floor-division / modulo and range-based simplification.

Note: indices are non-negative integers. `FloorDiv` and `ModIndex` pull out terms whose
coefficients the divisor divides (exact for integers); `simplify_index` then uses the ranges
of the loop variables to drop a division or modulo whose argument is already below the divisor.
"""
from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

import sympy

Expr = sympy.Expr


class FloorDiv(sympy.Function):
    """base // divisor for non-negative integer index expressions."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if divisor.is_Integer:
            d = int(divisor)
            if isinstance(base, FloorDiv) and base.args[1].is_Integer:
                return FloorDiv(base.args[0], int(base.args[1]) * d)  # (x // a) // b == x // (a*b)
            if isinstance(base, ModIndex) and base.args[1].is_Integer and int(base.args[1]) % d == 0:
                return ModIndex(FloorDiv(base.args[0], d), int(base.args[1]) // d)  # (x % (a*d)) // d
            pulled, rest = _split_divisible(base, d)
            if pulled != 0:
                return pulled + FloorDiv(rest, divisor)
        return None


class ModIndex(sympy.Function):
    """base % divisor for non-negative integer index expressions."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) % int(divisor))
        if divisor.is_Integer:
            if isinstance(base, ModIndex) and base.args[1].is_Integer and int(base.args[1]) % int(divisor) == 0:
                return ModIndex(base.args[0], divisor)  # (x % (a*d)) % d == x % d
            pulled, rest = _split_divisible(base, int(divisor))
            if pulled != 0:
                return ModIndex(rest, divisor)
        return None


def _split_divisible(expr: Expr, d: int) -> tuple[Expr, Expr]:
    """Split expr into (sum of terms divisible by d, divided by d; the other terms)."""
    pulled, rest = sympy.Integer(0), sympy.Integer(0)
    for term in _sum_terms(expr):
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % d == 0:
            pulled += term / d
        else:
            rest += term
    return pulled, rest


def _sum_terms(expr: Expr) -> list[Expr]:
    """The terms of expr as a flat sum, leaving the arguments of divisions and remainders as they
    are: a full `sympy.expand` rewrites every nested index again, and a chain of ten views (MaxViT's
    window and grid partitions) nests ten deep, so it took most of that model's compile time."""
    terms: list[Expr] = []
    for term in sympy.Add.make_args(expr):
        if term.is_Mul and any(a.is_Add for a in term.args):
            terms.extend(sympy.Add.make_args(sympy.expand(term)))  # a product of sums: distribute it
        else:
            terms.append(term)
    return terms


def bounds(expr: Expr, ranges: Mapping[sympy.Symbol, int]) -> tuple[int, int] | None:
    """Inclusive (lo, hi) of expr over the variables' ranges, or None if unknown."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        if expr in ranges:
            return 0, max(int(ranges[expr]) - 1, 0)
        return None
    if isinstance(expr, sympy.Add):
        lo = hi = 0
        for a in expr.args:
            b = bounds(a, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return lo, hi
    if isinstance(expr, sympy.Mul):
        lo = hi = 1
        for a in expr.args:
            b = bounds(a, ranges)
            if b is None:
                return None
            cands = [lo * b[0], lo * b[1], hi * b[0], hi * b[1]]
            lo, hi = min(cands), max(cands)
        return lo, hi
    if isinstance(expr, FloorDiv):
        b = bounds(expr.args[0], ranges)
        if b is None or not expr.args[1].is_Integer or b[0] < 0:
            return None
        d = int(expr.args[1])
        return b[0] // d, b[1] // d
    if isinstance(expr, ModIndex):
        if not expr.args[1].is_Integer:
            return None
        return 0, int(expr.args[1]) - 1
    return None


def simplify_index(expr: Expr, ranges: Mapping[sympy.Symbol, int]) -> Expr:
    """Drop FloorDiv/ModIndex that the variable ranges make trivial; expand the rest.

    Cached: a kernel's indices are simplified again for every launch config the tuner generates
    source for (48 candidates per kernel), and on a deep view chain (Mamba's unrolled scan) that was
    most of a tune's time."""
    return _simplify_index(expr, tuple(ranges.items()))


@functools.lru_cache(maxsize=1 << 16)
def _simplify_index(expr: Expr, range_items: tuple[tuple[sympy.Symbol, int], ...]) -> Expr:
    ranges = dict(range_items)
    expr = sympy.expand(expr)

    def visit(e: Expr) -> Expr:
        if not e.args:
            return e
        e = e.func(*[visit(a) for a in e.args])
        if isinstance(e, (FloorDiv, ModIndex)) and e.args[1].is_Integer:
            b = bounds(e.args[0], ranges)
            if b is not None and b[0] >= 0 and b[1] < int(e.args[1]):
                return sympy.Integer(0) if isinstance(e, FloorDiv) else e.args[0]
            return _drop_low_digits(e, ranges)
        return e

    return _merge_digits(sympy.expand(visit(expr)))


def _merge_digits(expr: Expr) -> Expr:
    """c*m*(x // m) + c*(x % m) == c*x: the digits of a position split by a view and joined by the
    next (GroupNorm's [N, G, C/G*H*W] read back as [N, C, H, W]: (h*W + w) // W and % W) are the
    position again, one multiply-add where the kernel computed a division and a remainder."""
    if not isinstance(expr, sympy.Add):
        return expr
    terms = dict(expr.as_coefficients_dict())
    changed = True
    while changed:
        changed = False
        for mod, c in list(terms.items()):
            if not isinstance(mod, ModIndex) or not mod.args[1].is_Integer:
                continue
            div = FloorDiv(*mod.args)
            if terms.get(div) == c * mod.args[1]:
                del terms[mod], terms[div]
                for t, k in sympy.expand(c * mod.args[0]).as_coefficients_dict().items():
                    terms[t] = terms.get(t, 0) + k
                changed = True
                break
    return sympy.expand(sympy.Add(*(k * t for t, k in terms.items())))


def _drop_low_digits(e: Expr, ranges: Mapping[sympy.Symbol, int]) -> Expr:
    """(g*A + R) // (g*m) == A // m and (g*A + R) % (g*m) == g*(A % m) + R when 0 <= R < g (A an
    integer): a view of a view (GroupNorm's [N, G, C/G*H*W] read back as [N, C, H, W]) leaves such
    divisions, which `fold_divmod` then folds back into the flat index."""
    base, d = e.args[0], int(e.args[1])
    terms = sympy.Add.make_args(sympy.expand(base))
    coeffs = [t.as_coeff_Mul()[0] for t in terms]
    # math.gcd: sympy.gcd of two Python ints goes through its polynomial machinery (25 µs a call against 0.04)
    for g in sorted({math.gcd(int(c), d) for c in coeffs if c.is_Integer and c != 0}, reverse=True):
        if g == 1:
            break
        high = [t for t, c in zip(terms, coeffs) if c.is_Integer and int(c) % g == 0]
        low = sympy.Add(*[t for t, c in zip(terms, coeffs) if not (c.is_Integer and int(c) % g == 0)])
        b = bounds(low, ranges)
        if not high or b is None or b[0] < 0 or b[1] >= g:
            continue
        a = sympy.expand(sympy.Add(*high) / g)
        return FloorDiv(a, d // g) if isinstance(e, FloorDiv) else g * ModIndex(a, d // g) + low
    return e


def _split_floordiv(e: Expr) -> tuple[Expr, int]:
    """(Y, d) with e == Y // d (d = 1 when e is not a division)."""
    if isinstance(e, FloorDiv) and e.args[1].is_Integer:
        return e.args[0], int(e.args[1])
    return e, 1


def fold_divmod(expr: Expr) -> Expr:
    """Undo a row-major split: m*((Y // d) % a) + m*a*(Y // (d*a)) == m*(Y // d), repeatedly, so a
    contiguous multi-dimensional index prints as the flat index it is."""
    changed = True
    while changed:
        changed = False
        terms = list(sympy.Add.make_args(expr))
        for i, t_mod in enumerate(terms):
            m, mod = t_mod.as_coeff_Mul()
            if not isinstance(mod, ModIndex) or not mod.args[1].is_Integer:
                continue
            a = int(mod.args[1])
            y, d = _split_floordiv(mod.args[0])
            for j, t_div in enumerate(terms):
                k, div = t_div.as_coeff_Mul()
                if j == i or not isinstance(div, FloorDiv):
                    continue
                y2, d2 = _split_floordiv(div)
                if y2 == y and d2 == d * a and k == m * a:
                    rest = [t for n, t in enumerate(terms) if n not in (i, j)]
                    expr = sympy.Add(*rest, m * (FloorDiv(y, d) if d != 1 else y))
                    changed = True
                    break
            if changed:
                break
    return expr


def row_major_vars(flat: Expr, sizes: Sequence[int]) -> list[Expr]:
    """Decompose a flat index into per-dimension indices, row-major."""
    if any(int(s) == 0 for s in sizes):
        return [sympy.Integer(0)] * len(sizes)  # no element: any index will do (and no division by 0)
    out: list[Expr] = []
    stride = 1
    for s in reversed(sizes):
        out.append(sympy.Integer(0) if s == 1 else ModIndex(FloorDiv(flat, stride), s))
        stride *= s
    out.reverse()
    if sizes and sizes[0] != 1:
        total_inner = 1
        for s in sizes[1:]:
            total_inner *= s
        out[0] = FloorDiv(flat, total_inner)
    return out


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def is_dense(size: Sequence[int], stride: Sequence[int]) -> bool:
    """True when (size, stride) is a permutation of a contiguous layout (no overlap, no holes)."""
    dims = sorted((st, sz) for sz, st in zip(size, stride) if sz != 1)
    expected = 1
    for st, sz in dims:
        if st != expected:
            return False
        expected *= sz
    return True


def non_overlapping(size: Sequence[int], stride: Sequence[int]) -> bool:
    """True when no two positions of (size, stride) share an element (holes allowed)."""
    dims = sorted((st, sz) for sz, st in zip(size, stride) if sz != 1)
    end = 1
    for st, sz in dims:
        if st < end:
            return False
        end = st * sz
    return True


def make_vars(prefix: str, n: int) -> list[sympy.Symbol]:
    return list(_vars(prefix, n))


@functools.lru_cache(maxsize=None)
def _vars(prefix: str, n: int) -> tuple[sympy.Symbol, ...]:
    """make_vars' symbols, built once: every node's `vars` asks for them, tens of thousands of times
    while fusion compares a model's nodes, and a sympy Symbol costs its assumptions each time."""
    return tuple(sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n))


def prod(xs: Sequence[int]) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p
