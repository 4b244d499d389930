"""Source text every generated kernel module starts with: imports and small @triton.jit helpers.

Note: Triton's CPU interpreter does not implement libdevice, so the math helpers have two
versions — libdevice on the GPU, compositions of core `tl` ops under the interpreter — selected
when the module is written. Reductions never call Triton's standard-library jit functions (tl.sum, tl.max, tl.sigmoid),
which the interpreter can only run when triton itself was imported in interpreter mode; they pass
Triton's own combine functions to tl.reduce (the interpreter then reduces with numpy) and add
torch's NaN propagation themselves.
"""
from __future__ import annotations

COMMON = '''
import triton
import triton.language as tl

# Triton's own combine functions: the interpreter reduces with numpy when it sees these
_fast_sum = tl.standard._sum_combine
_fast_max = tl.standard._elementwise_max
_fast_min = tl.standard._elementwise_min


@triton.jit
def _max_combine(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _min_combine(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _sum_combine(a, b):
    return a + b


@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def _argmax_combine(a, ai, b, bi):
    a_nan = a != a
    b_nan = b != b
    tie = (a == b) | (a_nan & b_nan)
    pick = (a > b) | (a_nan & ~b_nan) | (tie & (ai < bi))
    return tl.where(pick, a, b), tl.where(pick, ai, bi)


@triton.jit
def _argmin_combine(a, ai, b, bi):
    a_nan = a != a
    b_nan = b != b
    tie = (a == b) | (a_nan & b_nan)
    pick = (a < b) | (a_nan & ~b_nan) | (tie & (ai < bi))
    return tl.where(pick, a, b), tl.where(pick, ai, bi)


@triton.jit
def _floordiv(a, b):
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def _remainder_int(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _remainder_float(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
'''

GPU_MATH = '''
from triton.language.extra import libdevice


@triton.jit
def _expm1(x):
    return libdevice.expm1(x)


@triton.jit
def _log1p(x):
    return libdevice.log1p(x)


@triton.jit
def _tanh(x):
    return libdevice.tanh(x)


@triton.jit
def _tan(x):
    return libdevice.tan(x)


@triton.jit
def _pow(a, b):
    return libdevice.pow(a, b)


@triton.jit
def _round(x):
    return libdevice.nearbyint(x)


@triton.jit
def _trunc(x):
    return libdevice.trunc(x)


@triton.jit
def _rsqrt(x):
    return libdevice.rsqrt(x)


@triton.jit
def _sqrt(x):
    return libdevice.sqrt(x)
'''

INTERPRETER_MATH = '''
@triton.jit
def _expm1(x):
    return tl.where(tl.abs(x) < 1e-5, x + 0.5 * x * x, tl.exp(x) - 1.0)


@triton.jit
def _log1p(x):
    return tl.where(tl.abs(x) < 1e-4, x - 0.5 * x * x, tl.log(1.0 + x))


@triton.jit
def _tanh(x):
    return tl.where(tl.abs(x) < 1e-3, x - x * x * x / 3.0, 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0))


@triton.jit
def _tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _trunc(x):
    return tl.where(x >= 0, tl.floor(x), tl.ceil(x))


@triton.jit
def _pow(a, b):
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    b_odd = b_int & (tl.floor(b * 0.5) * 2.0 != b)
    neg = tl.where(b_int, tl.where(b_odd, -mag, mag), float("nan"))
    r = tl.where(a < 0, neg, mag)
    return tl.where(b == 0, 1.0, r)


@triton.jit
def _round(x):
    r = tl.floor(x + 0.5)
    odd = tl.floor(r * 0.5) * 2.0 != r
    return tl.where((r - x == 0.5) & odd, r - 1.0, r)


@triton.jit
def _rsqrt(x):
    return 1.0 / tl.sqrt_rn(x)


@triton.jit
def _sqrt(x):
    return tl.sqrt_rn(x)
'''


def prelude(interpret: bool) -> str:
    return COMMON + (INTERPRETER_MATH if interpret else GPU_MATH)
