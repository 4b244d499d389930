"""Source text every generated kernel module starts with: imports and small @triton.jit helpers.

Note: Triton's CPU interpreter does not implement libdevice, so the math helpers have two
versions — libdevice on the GPU, compositions of core `tl` ops under the interpreter — selected
when the module is written. Reductions never call Triton's standard-library jit functions (tl.sum, tl.max, tl.sigmoid),
which the interpreter can only run when triton itself was imported in interpreter mode; they pass
Triton's own combine functions to tl.reduce (the interpreter then reduces with numpy) and add
torch's NaN propagation themselves.
"""
from __future__ import annotations

import functools

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
def _max_nan(a, b):
    # one NaN-propagating max instruction (the online update's chunk max)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan(a, b):
    # one NaN-propagating min instruction (a float min reduction's combine on the GPU)
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


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
def _floordiv_float(a, b):
    # eager's floor division: from fmod, so a quotient that rounds up to an integer (1.0 // 0.1) is
    # not floored past the true one, then the nearest integer; a zero quotient keeps the sign of a / b
    r = _fmod(a, b)
    q = (a - r) / b
    q = tl.where((r != 0) & ((b < 0) != (r < 0)), q - 1.0, q)
    f = tl.floor(q)
    f = tl.where(q - f > 0.5, f + 1.0, f)
    f = tl.where(q == 0, (a / b) * 0.0, f)
    return tl.where(b == 0, a / b, f)


@triton.jit
def _remainder_int(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _remainder_float(a, b):
    r = _fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _philox(seed, offset):
    # the first two words of Philox-4x32 with 10 rounds of counter (offset, 0, 0, 0) under the key
    # (seed's low, high words), for int32 offsets: the words of tl.randint4x(seed, offset)
    s = seed.to(tl.uint64, bitcast=True)
    k0 = (s & 0xFFFFFFFF).to(tl.uint32)
    k1 = (s >> 32).to(tl.uint32)
    c0 = offset.to(tl.uint32, bitcast=True)
    c1 = c0 * 0
    c2 = c0 * 0
    c3 = c0 * 0
    for _ in tl.static_range(10):
        a0 = c0
        c0 = tl.math.umulhi(c2, 0xCD9E8D57) ^ c1 ^ k0
        c1 = c2 * 0xCD9E8D57
        c2 = tl.math.umulhi(a0, 0xD2511F53) ^ c3 ^ k1
        c3 = a0 * 0xD2511F53
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1


@triton.jit
def _uniform(word):
    x = word.to(tl.int32, bitcast=True)
    x = tl.where(x < 0, ~x, x)
    return x.to(tl.float32) * 4.6566127342e-10


@triton.jit
def _rand(seed, offset):
    # uniform in [0, 1): the numbers of tl.rand(seed, offset)
    w0, w1 = _philox(seed, offset)
    return _uniform(w0)


@triton.jit
def _randn(seed, offset):
    # standard normal, Box-Muller of the first two words: the numbers of tl.randn(seed, offset)
    w0, w1 = _philox(seed, offset)
    u1 = tl.maximum(_uniform(w0), 1.0e-7)
    return tl.sqrt(-2.0 * tl.log(u1)) * tl.cos(6.283185307179586 * _uniform(w1))


@triton.jit
def _f8_rounded(x, MANT: tl.constexpr, BIAS: tl.constexpr, MAXV: tl.constexpr, OVER_FROM: tl.constexpr,
                OVER: tl.constexpr):
    # x rounded as torch converts it to a float8 (MANT mantissa bits, exponent bias BIAS): to nearest
    # even, capped at MAXV, OVER from OVER_FROM on (e5m2: infinity from 61440; e4m3fn: NaN past 464
    # or, where torch saturates, never: NaN), NaN kept; an f32 that the float8 holds exactly, so any
    # conversion of it after is exact
    x = x.to(tl.float32)
    a = tl.minimum(tl.abs(x), MAXV)
    # the quantum at a's exponent (subnormals: the smallest), as biased exponents of it and its inverse
    e = tl.maximum((a.to(tl.int32, bitcast=True) >> 23), 128 - BIAS) - MANT
    q, q_inv = (e << 23).to(tl.float32, bitcast=True), ((254 - e) << 23).to(tl.float32, bitcast=True)
    r = (a * q_inv + 8388608.0 - 8388608.0) * q     # 2^23: the add rounds to an integer, to even
    r = tl.where(tl.abs(x) >= OVER_FROM, OVER, r)
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, -r, r)
    return tl.where(x != x, x, r)
'''

GPU_MATH = '''
from triton.language.extra import libdevice


@triton.jit
def _opaque_index(x):
    # the same integers, out of reach of Triton's axis analysis (see _needs_opaque_index)
    if x.dtype == tl.int64:
        return tl.inline_asm_elementwise("mov.b64 $0, $1;", "=l,l", [x], dtype=tl.int64, is_pure=True, pack=1)
    else:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _fmod(a, b):
    # exact, as C's fmod: a float `%` is a - b * trunc(a / b) on the GPU, NaN for a finite a over an
    # infinite b and wrong where a / b overflows
    return libdevice.fmod(a, b)


@triton.jit
def _expm1(x):
    return libdevice.expm1(x)


@triton.jit
def _log1p(x):
    return libdevice.log1p(x)


@triton.jit
def _log10(x):
    return libdevice.log10(x)


@triton.jit
def _tanh(x):
    return libdevice.tanh(x)


@triton.jit
def _tanh_approx(x):
    # the SFU's tanh (relative error about 2^-11): only where every output is 16-bit (fast_math.py)
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _log2e_mul(x):
    # x·log2(e) rounded as written: an explicit .rn is never contracted into an FMA, so every use of
    # an online reference R sees the same rounded value (online.py)
    return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, 0f3FB8AA3B;", "=f,f", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)


@triton.jit
def _exp_neg_abs(d):
    # exp(-|d|), 0 for a NaN d: the non-propagating max turns NaN into -inf (online.py's lane update)
    return tl.exp(tl.maximum(-tl.abs(d), float("-inf")))


@triton.jit
def _exp2_ftz(x):
    # ex2 without the denormal fix-up around it (online.py: results below 2^-126 add nothing to a sum >= 1)
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


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


@triton.jit
def _atan(x):
    return libdevice.atan(x)


@triton.jit
def _atan2(y, x):
    return libdevice.atan2(y, x)


@triton.jit
def _hypot(a, b):
    return libdevice.hypot(a, b)


@triton.jit
def _asin(x):
    return libdevice.asin(x)


@triton.jit
def _acos(x):
    return libdevice.acos(x)


@triton.jit
def _sinh(x):
    return libdevice.sinh(x)


@triton.jit
def _cosh(x):
    return libdevice.cosh(x)


@triton.jit
def _asinh(x):
    return libdevice.asinh(x)


@triton.jit
def _erfinv(x):
    return libdevice.erfinv(x)


@triton.jit
def _lgamma(x):
    return libdevice.lgamma(x)


@triton.jit
def _acosh(x):
    return libdevice.acosh(x)


@triton.jit
def _atanh(x):
    return libdevice.atanh(x)


@triton.jit
def _erfc(x):
    return libdevice.erfc(x)


@triton.jit
def _to_bf16(x):
    return x.to(tl.bfloat16)

@triton.jit
def _to_f8e4(x):
    # the GPU's own conversion (sm_89+: cvt.rn.satfinite) rounds to nearest even, keeps NaN and
    # saturates finite values and infinities at 448, as torch's saturating rule does; torch's NaN
    # rule is applied before it. One instruction where rounding by hand takes about fifteen
    return _f8e4_overflowed(x.to(tl.float32), E4M3_OVERFLOW).to(tl.float8e4nv)


@triton.jit
def _f8e4_overflowed(x, OVER_FROM: tl.constexpr, OVER: tl.constexpr):
    return tl.where(tl.abs(x) >= OVER_FROM, OVER, x)


@triton.jit
def _to_f8e5(x):
    # e5m2 is float16's upper byte: its bits taken from the exact float16, whatever saturation the
    # hardware conversion applies to infinities
    h = _f8_rounded(x, 2, 15, 57344.0, 61440.0, float("inf")).to(tl.float16).to(tl.int16, bitcast=True)
    return (h >> 8).to(tl.int8).to(tl.float8e5, bitcast=True)


@triton.jit
def _from_f8e4(x):
    return x.to(tl.float32)


@triton.jit
def _from_f8e5(x):
    return x.to(tl.float32)
'''

# Under the interpreter every helper must be accurate to a few f32 ulps (the tests compare with
# eager at rtol 1e-4): no 1 - exp / exp - 1 cancellation, no truncating bf16 conversion.
INTERPRETER_MATH = '''
@triton.jit
def _opaque_index(x):
    return x


@triton.jit
def _fmod(a, b):
    return a % b   # numpy's fmod: exact


@triton.jit
def _expm1(x):
    # Kahan: (u - 1) * x / log(u) with u = exp(x) cancels the rounding error of u
    u = tl.exp(x)
    um1 = u - 1.0
    small = tl.where(u == 1.0, x, um1 * (x / tl.log(u)))
    return tl.where(tl.abs(x) < 0.5, small, um1)


@triton.jit
def _log1p(x):
    # Kahan: log(u) * x / (u - 1) with u = 1 + x
    u = 1.0 + x
    small = tl.where(u == 1.0, x, tl.log(u) * (x / (u - 1.0)))
    return tl.where(tl.abs(x) < 0.5, small, tl.log(u))


@triton.jit
def _log10(x):
    # log(x) / ln(10): the product adds one rounding to the log's
    return tl.log(x) * 0.4342944819032518


@triton.jit
def _tanh(x):
    u = _expm1(2.0 * x)
    big = 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)
    return tl.where(tl.abs(x) < 0.625, u / (u + 2.0), big)


@triton.jit
def _tanh_approx(x):
    # no inline PTX in the interpreter: the accurate tanh stands in
    return _tanh(x)


@triton.jit
def _exp_neg_abs(d):
    # Triton 3.7's interpreter propagates NaN through tl.maximum: the NaN is dropped by a select
    return tl.exp(tl.where(d != d, float("-inf"), -tl.abs(d)))


@triton.jit
def _exp2_ftz(x):
    return tl.exp2(x)


@triton.jit
def _log2e_mul(x):
    return x * 1.4426950408889634


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
    return tl.where((b == 0) | (a == 1.0), 1.0, r)   # pow(x, 0) and pow(1, y) are 1, NaN included


@triton.jit
def _round(x):
    # half to even; x - floor(x) is exact, unlike floor(x + 0.5)
    r = tl.floor(x)
    d = x - r
    odd = tl.floor(r * 0.5) * 2.0 != r
    y = tl.where((d > 0.5) | ((d == 0.5) & odd), r + 1.0, r)
    return tl.where(y == 0, x * 0.0, y)   # -0.5 <= x < 0 rounds to -0.0, as on the GPU


@triton.jit
def _rsqrt(x):
    return 1.0 / tl.sqrt(x)


@triton.jit
def _sqrt(x):
    # the interpreter's tl.sqrt is numpy's, correctly rounded for every dtype (tl.sqrt_rn is f32-only)
    return tl.sqrt(x)


@triton.jit
def _atan(x):
    # Cephes atan (double precision): reduce |x| to [0, 0.66], then a rational approximation
    ax = tl.abs(x)
    big = ax > 2.414213562373095
    mid = ax > 0.66
    t = tl.where(big, -1.0 / ax, tl.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    extra = tl.where(big, 6.123233995736766e-17, tl.where(mid, 3.061616997868383e-17, 0.0))
    z = t * t
    p = (((-8.750608600031904e-1 * z - 1.615753718733365e1) * z - 7.500855792314705e1) * z
         - 1.228866684490136e2) * z - 6.485021904942025e1
    q = ((((z + 2.485846490142306e1) * z + 1.650270098316988e2) * z + 4.328810604912903e2) * z
         + 4.853903996359137e2) * z + 1.945506571482614e2
    r = base + (t * (z * p / q) + t + extra)
    return tl.where(x < 0, -r, tl.where(x != x, x, r))


@triton.jit
def _atan2(y, x):
    # C's atan2 from atan(y / x) and the operands' signs, signed zeros and infinities included
    pi = 3.141592653589793
    y_neg = (y < 0) | ((y == 0) & (1.0 / y < 0))
    x_neg = (x < 0) | ((x == 0) & (1.0 / x < 0))
    both_inf = (tl.abs(y) == float("inf")) & (tl.abs(x) == float("inf"))
    q = tl.where(both_inf, tl.where(y_neg, -1.0, 1.0), y / tl.where(both_inf, 1.0, x))
    a = _atan(q)
    a = tl.where(both_inf, tl.where(x_neg, 3.0, 1.0) * a, a)
    half_turn = tl.where(y_neg, -pi, pi)
    r = tl.where(x_neg & ~both_inf, a + half_turn, a)
    return tl.where((y == 0) & (x == 0), tl.where(x_neg, half_turn, y), r)


@triton.jit
def _hypot(a, b):
    # scaled, so that squares of large operands do not overflow; an infinite operand wins over NaN
    a = tl.abs(a)
    b = tl.abs(b)
    big = tl.where(a > b, a, b)
    small = tl.where(a > b, b, a)
    r = small / tl.where(big == 0, 1.0, big)
    h = big * tl.sqrt(1.0 + r * r)
    return tl.where((a == float("inf")) | (b == float("inf")), float("inf"), h)


@triton.jit
def _asin(x):
    return _atan(x / tl.sqrt((1.0 - x) * (1.0 + x)))


@triton.jit
def _acos(x):
    return 2.0 * _atan(tl.sqrt((1.0 - x) / (1.0 + x)))


@triton.jit
def _sinh(x):
    u = _expm1(x)
    small = 0.5 * u * (u + 2.0) / (u + 1.0)
    return tl.where(tl.abs(x) < 1.0, small, 0.5 * (tl.exp(x) - tl.exp(-x)))


@triton.jit
def _cosh(x):
    return 0.5 * (tl.exp(x) + tl.exp(-x))


@triton.jit
def _asinh(x):
    # odd, through log1p near 0; log(2|x|) past 1e8, where |x|^2 would overflow and 1 / (4 x^2) is lost
    a = tl.abs(x)
    r = tl.where(a > 1e8, tl.log(a) + 0.6931471805599453, _log1p(a + a * a / (1.0 + tl.sqrt(1.0 + a * a))))
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))


@triton.jit
def _acosh(x):
    # log1p of (x - 1) + sqrt((x - 1)(x + 1)): exact near 1; NaN below 1
    d = x - 1.0
    r = tl.where(x > 1e8, tl.log(x) + 0.6931471805599453, _log1p(d + tl.sqrt(d * (2.0 + d))))
    return tl.where(x < 1.0, float("nan"), r)


@triton.jit
def _erfinv(x):
    # in f64: Giles' single-precision approximation, then two Newton steps on erf; +-inf at +-1
    d = x.to(tl.float64)
    w = -tl.log((1.0 - d) * (1.0 + d))
    c = w - 2.5
    pc = 2.81022636e-08
    pc = 3.43273939e-07 + pc * c
    pc = -3.5233877e-06 + pc * c
    pc = -4.39150654e-06 + pc * c
    pc = 0.00021858087 + pc * c
    pc = -0.00125372503 + pc * c
    pc = -0.00417768164 + pc * c
    pc = 0.246640727 + pc * c
    pc = 1.50140941 + pc * c
    t = tl.sqrt(w) - 3.0
    pt = -0.000200214257
    pt = 0.000100950558 + pt * t
    pt = 0.00134934322 + pt * t
    pt = -0.00367342844 + pt * t
    pt = 0.00573950773 + pt * t
    pt = -0.0076224613 + pt * t
    pt = 0.00943887047 + pt * t
    pt = 1.00167406 + pt * t
    pt = 2.83297682 + pt * t
    y = tl.where(w < 5.0, pc, pt) * d
    for _ in tl.static_range(2):
        y = y - (tl.erf(y) - d) / (1.1283791670955126 * tl.exp(-y * y))
    y = tl.where(tl.abs(d) == 1.0, d * float("inf"), y)
    return y.to(x.dtype)


@triton.jit
def _lgamma(x):
    # in f64: Lanczos (g = 7, 9 terms) from 0.5 up, the reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
    # below (sin(pi x) after reducing x mod 2, exact); +inf at the poles and at +-inf
    d = x.to(tl.float64)
    low = d < 0.5
    z = tl.where(low, 1.0 - d, d) - 1.0
    s = 0.99999999999980993 + 676.5203681218851 / (z + 1.0)
    s = s - 1259.1392167224028 / (z + 2.0)
    s = s + 771.32342877765313 / (z + 3.0)
    s = s - 176.61502916214059 / (z + 4.0)
    s = s + 12.507343278686905 / (z + 5.0)
    s = s - 0.13857109526572012 / (z + 6.0)
    s = s + 9.9843695780195716e-6 / (z + 7.0)
    s = s + 1.5056327351493116e-7 / (z + 8.0)
    t = z + 7.5
    lg = 0.9189385332046727 + (z + 0.5) * tl.log(t) - t + tl.log(s)
    r = d - 2.0 * tl.floor(d * 0.5 + 0.5)
    lg = tl.where(low, 1.1447298858494002 - tl.log(tl.abs(tl.sin(3.141592653589793 * r))) - lg, lg)
    lg = tl.where((tl.abs(d) == float("inf")) | (low & (d == tl.floor(d))), float("inf"), lg)
    return lg.to(x.dtype)


@triton.jit
def _atanh(x):
    # odd, 0.5 * log1p(2|x| / (1 - |x|)): +-inf at +-1, NaN past them
    a = tl.abs(x)
    r = 0.5 * _log1p(2.0 * a / (1.0 - a))
    return tl.where(x < 0, -r, tl.where(x == 0, x, r))


@triton.jit
def _erfc(x):
    # Numerical Recipes erfcc (fractional error 1.2e-7; in f32 about 1e-5 where exp's argument is
    # large) — 1 - erf(x) loses all relative precision for x > 2
    z = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = t * tl.exp(poly)
    return tl.where(x < 0, 2.0 - r, r)


@triton.jit
def _to_bf16(x):
    # round to nearest even by hand: the interpreter's own f32 -> bf16 conversion truncates
    x = x.to(tl.float32)
    bits = x.to(tl.uint32, bitcast=True)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    hi = tl.where(x != x, 0x7FC0, rounded >> 16)
    return hi.to(tl.uint16).to(tl.bfloat16, bitcast=True)

@triton.jit
def _to_f8e4(x):
    # rounded by hand: the interpreter's own conversion rounds wrongly, exact values it converts right;
    # it takes the format for one with infinities, where NaN's bits (all ones) read 480
    r = _f8_rounded(x, 3, 7, 448.0, E4M3_OVERFLOW)
    return tl.where(r != r, 480.0, r).to(tl.float8e4nv)


@triton.jit
def _to_f8e5(x):
    return _f8_rounded(x, 2, 15, 57344.0, 61440.0, float("inf")).to(tl.float8e5)


@triton.jit
def _from_f8e4(x):
    # the interpreter reads e4m3fn's NaN (exponent and mantissa all ones) as 480
    v = x.to(tl.float32)
    return tl.where(tl.abs(v) > 448.0, float("nan"), v)


@triton.jit
def _from_f8e5(x):
    # the interpreter reads e5m2's all-ones exponent as 2^16: infinity, or NaN past it
    v = x.to(tl.float32)
    a = tl.abs(v)
    return tl.where(a == 65536.0, v * float("inf"), tl.where(a > 65536.0, float("nan"), v))
'''


@functools.cache
def e4m3_overflow(device: str) -> str:
    """What torch's conversion on `device` makes of a value past e4m3fn's range, as _f8_rounded's
    last two arguments: NaN past 464 (what rounds to 480, infinities too) or saturation at 448.
    Read off torch itself: it differs between versions and, in torch 2.11, between devices (its
    CUDA kernel gives NaN, its CPU kernel saturates). Without a GPU, GPU code follows the CPU's."""
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        device = "cpu"
    nan = bool(torch.tensor([480.0], device=device).to(torch.float8_e4m3fn).float().isnan().item())
    # torch's NaN rule rounds first: past 464 (the tie, kept at 448) a value rounds to NaN's bits
    return '464.000030517578125, float("nan")' if nan else 'float("nan"), float("nan")'


@functools.cache
def prelude(interpret: bool) -> str:
    math = INTERPRETER_MATH if interpret else GPU_MATH
    return COMMON + math.replace("E4M3_OVERFLOW", e4m3_overflow("cpu" if interpret else "cuda"))
