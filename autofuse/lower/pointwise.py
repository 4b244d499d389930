"""Elementwise lowerings: arithmetic with torch's type promotion, math functions, comparisons,
logical and bitwise ops, where, clamp, dtype conversion."""
from __future__ import annotations

from typing import Any

import torch

from ..ir.values import ComputedBuffer, ExternBuffer, Pointwise, ReinterpretView
from .common import LOW_PRECISION, make_pointwise, promoted_dtype, returns_bool, round_scalar, upcast
from .registry import Unsupported, register

aten = torch.ops.aten
prims = torch.ops.prims


def _compute(g: Any) -> torch.dtype:
    return upcast(g.out.dtype)


def _elementwise(g: Any, inputs: list, fn: Any, cd: torch.dtype, common: torch.dtype | None = None) -> Pointwise:
    """make_pointwise for an op whose operands eager casts to one common dtype (the output's unless
    given) before computing: where that dtype is 16-bit, a float operand of another dtype (a 0-d
    float16 tensor beside bfloat16 ones) is rounded to it first, not just widened to float32."""
    common = g.out.dtype if common is None else common
    return make_pointwise(g, inputs, fn, cd, round_to=common if common in LOW_PRECISION else None)


# rounding functions are the identity on integers (eager returns a copy); the Triton ops take floats only
INTEGER_IDENTITY = ("floor", "ceil", "trunc", "round")
# + and * of bools are logical or / and in eager (True + True is True)
BOOL_OPS = {"add": "logical_or", "mul": "logical_and"}


def _unary(opname: str):
    def lower(g, x, *rest, **kw):
        if rest or kw:
            raise Unsupported(f"extra arguments to {opname}")
        cd = _compute(g)
        if opname in INTEGER_IDENTITY and not cd.is_floating_point:
            return make_pointwise(g, [x], lambda ops, a: a, cd)
        return make_pointwise(g, [x], lambda ops, a: getattr(ops, opname)(a), cd)
    return lower


def _binary(opname: str):
    def lower(g, a, b, **kw):
        if kw:
            raise Unsupported(f"extra arguments to {opname}")
        cd = _compute(g)
        name = BOOL_OPS.get(opname, opname) if cd == torch.bool else opname
        fn = (lambda ops, x, y: getattr(ops, name)(x, y))
        if cd == torch.bool and name != opname:
            fn = returns_bool(fn)
        return _elementwise(g, [a, b], fn, cd)
    return lower


UNARY = {
    aten.neg: "neg", aten.abs: "abs", aten.sqrt: "sqrt", aten.rsqrt: "rsqrt", aten.exp: "exp",
    aten.exp2: "exp2", aten.expm1: "expm1", aten.log: "log", aten.log2: "log2", aten.log1p: "log1p",
    aten.sin: "sin", aten.cos: "cos", aten.tan: "tan", aten.tanh: "tanh", aten.sigmoid: "sigmoid",
    aten.erf: "erf", aten.floor: "floor", aten.ceil: "ceil", aten.trunc: "trunc", aten.relu: "relu",
    aten.atan: "atan", aten.asin: "asin", aten.acos: "acos", aten.sinh: "sinh", aten.cosh: "cosh",
    aten.erfc: "erfc", aten.reciprocal: "reciprocal", aten.asinh: "asinh", aten.acosh: "acosh",
    aten.atanh: "atanh", aten.erfinv: "erfinv", aten.lgamma: "lgamma", aten.log10: "log10",
}
for _op, _name in UNARY.items():
    register(_op)(_unary(_name))

BINARY = {
    aten.mul: "mul", aten.maximum: "maximum", aten.minimum: "minimum", aten.fmod: "fmod",
    aten.bitwise_and: "bitwise_and", aten.bitwise_or: "bitwise_or",
    aten.bitwise_xor: "bitwise_xor", aten.bitwise_left_shift: "lshift", aten.bitwise_right_shift: "rshift",
    aten.__lshift__: "lshift", aten.__rshift__: "rshift",
}
for _op, _name in BINARY.items():
    register(_op)(_binary(_name))


def _power_of_two(b: Any) -> int | None:
    """log2 of a positive integral Python scalar that is a power of two, else None."""
    if isinstance(b, int) and not isinstance(b, bool) and b > 0 and b & (b - 1) == 0:
        return b.bit_length() - 1
    return None


def _int_floor_div_or_mod(g, a, b, name: str):
    """Integer floor division and remainder by a power of two as a shift and a mask: two's
    complement makes both exact for negative operands too (-7 >> 1 is -4, -7 & 1 is 1), where the
    general forms divide in int64, which the GPU emulates in tens of instructions (the midpoints of
    bucketize's binary search halved its speed)."""
    cd = _compute(g)
    k = _power_of_two(b)
    if cd.is_floating_point or k is None or isinstance(a, (int, float)):
        return _elementwise(g, [a, b], lambda ops, x, y: getattr(ops, name)(x, y), cd)
    if name == "floordiv":
        return _elementwise(g, [a, k], lambda ops, x, s: ops.rshift(x, s), cd)
    return _elementwise(g, [a, (1 << k) - 1], lambda ops, x, m: ops.bitwise_and(x, m), cd)


@register(aten.floor_divide)
def _floor_divide(g, a, b):
    return _int_floor_div_or_mod(g, a, b, "floordiv")


@register(aten.remainder)
def _remainder(g, a, b):
    return _int_floor_div_or_mod(g, a, b, "remainder")


@register(aten.add, aten.sub)
def _add_sub(g, a, b, alpha=1):
    name = "add" if g.node.target.overloadpacket is aten.add else "sub"
    cd = _compute(g)
    if cd == torch.bool:  # bool + bool is logical or (eager rejects bool subtraction)
        if name != "add":
            raise Unsupported("bool subtraction")
        return _elementwise(g, [a, b, alpha], returns_bool(
            lambda ops, x, y, al: ops.logical_or(x, ops.logical_and(y, al))), cd)
    if alpha == 1:
        return _elementwise(g, [a, b], lambda ops, x, y: getattr(ops, name)(x, y), cd)
    return _elementwise(g, [a, b, alpha], lambda ops, x, y, al: getattr(ops, name)(x, ops.mul(y, al)), cd)


@register(aten.rsub)
def _rsub(g, a, b, alpha=1):
    return _elementwise(g, [a, b, alpha], lambda ops, x, y, al: ops.sub(y, ops.mul(x, al)), _compute(g))


@register(aten.div)
def _div(g, a, b, rounding_mode=None):
    cd = _compute(g)
    if rounding_mode is None:
        return _elementwise(g, [a, b], lambda ops, x, y: ops.truediv(x, y), cd)
    if cd.is_floating_point:
        if rounding_mode == "floor":
            return _elementwise(g, [a, b], lambda ops, x, y: ops.floordiv(x, y), cd)
        out = g.out.dtype
        if out in LOW_PRECISION and not isinstance(b, (int, float)):
            # eager truncates the quotient of two half tensors after rounding it to the half dtype
            # (trunc(Half(a / b))); a Python-scalar divisor takes its f32 path: trunc(float(a) / b)
            return _elementwise(g, [a, b], lambda ops, x, y: ops.trunc(
                ops.to_dtype(ops.to_dtype(ops.truediv(x, y), out), cd)), cd)
        return _elementwise(g, [a, b], lambda ops, x, y: ops.trunc(ops.truediv(x, y)), cd)
    if rounding_mode == "floor":
        return _int_floor_div_or_mod(g, a, b, "floordiv")
    return _elementwise(g, [a, b], lambda ops, x, y: ops.truncdiv(x, y), cd)


MAX_EXPANDED_POW = 32  # a constant integral exponent up to this becomes repeated multiplication


@register(aten.pow)
def _pow(g, a, b):
    cd = _compute(g)
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            return make_pointwise(g, [a], lambda ops, x: ops.mul(x, x), cd)
        if b == 1:
            return make_pointwise(g, [a], lambda ops, x: x, cd)
        if b == 0.5 and cd.is_floating_point:
            return make_pointwise(g, [a], lambda ops, x: ops.sqrt(x), cd)
        if b == -1 and cd.is_floating_point:
            return make_pointwise(g, [a], lambda ops, x: ops.reciprocal(x), cd)
        if cd.is_floating_point and float(b).is_integer() and 0 < abs(b) <= MAX_EXPANDED_POW:
            # x ** 3 as x * x * x (eager's CUDA kernel and Inductor do so too): a few multiplies
            # instead of libdevice's pow, which costs tens of instructions per element
            e = int(abs(b))
            if b > 0:
                return make_pointwise(g, [a], lambda ops, x: _int_pow(ops, x, e, cd), cd)
            return make_pointwise(g, [a], lambda ops, x: ops.reciprocal(_int_pow(ops, x, e, cd)), cd)
    if not cd.is_floating_point:
        if isinstance(b, int) and not isinstance(b, bool) and b >= 0 and not isinstance(a, (int, float)):
            return make_pointwise(g, [a], lambda ops, x: _int_pow(ops, x, b, cd), cd)
        raise Unsupported("integer pow with a tensor or negative exponent")
    return _elementwise(g, [a, b], lambda ops, x, y: ops.pow(x, y), cd)


def _int_pow(ops, x, e: int, dtype: torch.dtype):
    """x ** e for a constant e >= 0 by repeated squaring (wraps like eager's integer pow)."""
    if e == 0:
        return ops.constant(1, dtype)
    result, base = None, x
    while e:
        if e & 1:
            result = base if result is None else ops.mul(result, base)
        e >>= 1
        if e:
            base = ops.mul(base, base)
    return result


@register("prims::fma")  # defined by torch._inductor.inductor_prims, which Dynamo imports when it emits it
def _fma(g, a, b, c):
    """Dynamo writes `addcmul_(t1, t2, value=v)` and `addcdiv_(..., value=v)` as fma(t1 * t2, v, self)."""
    return _elementwise(g, [a, b, c], lambda ops, x, y, z: ops.fma(x, y, z), _compute(g))


@register(aten.atan2, aten.hypot)
def _float_binary(g, a, b):
    name = g.node.target.overloadpacket.__name__
    return _elementwise(g, [a, b], lambda ops, x, y: getattr(ops, name)(x, y), _compute(g))


@register(aten.fmax, aten.fmin)
def _fmax_fmin(g, a, b):
    """max / min that ignores a NaN operand (NaN only where both are), as C's fmax and fmin."""
    name = "maximum" if g.node.target.overloadpacket is aten.fmax else "minimum"
    cd = _compute(g)
    if not cd.is_floating_point:
        return _elementwise(g, [a, b], lambda ops, x, y: getattr(ops, name)(x, y), cd)
    return _elementwise(g, [a, b], lambda ops, x, y: ops.where(
        ops.isnan(x), y, ops.where(ops.isnan(y), x, getattr(ops, name)(x, y))), cd)


@register(aten.copysign)
def _copysign(g, a, b):
    return _elementwise(g, [a, b], lambda ops, x, y: ops.where(ops.signbit(y), ops.neg(ops.abs(x)), ops.abs(x)),
                        _compute(g))


@register(aten.signbit)
def _signbit(g, x):
    return make_pointwise(g, [x], returns_bool(lambda ops, a: ops.signbit(a)), upcast(x.dtype))


@register(aten.sign, aten.sgn)
def _sign(g, x):
    if g.out.dtype == torch.bool:
        return make_pointwise(g, [x], lambda ops, a: a, torch.bool)
    return make_pointwise(g, [x], lambda ops, a: ops.sign(a), _compute(g))


@register(aten.round)
def _round(g, x, decimals=0):
    cd = _compute(g)
    if not cd.is_floating_point:
        return make_pointwise(g, [x], lambda ops, a: a, cd)
    if decimals == 0:
        return make_pointwise(g, [x], lambda ops, a: ops.round(a), cd)
    # eager: nearbyint(a * 10^d) / 10^d, and for d < 0 nearbyint(a / 10^-d) * 10^-d (exact powers of ten)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return make_pointwise(g, [x, scale], lambda ops, a, s: ops.truediv(ops.round(ops.mul(a, s)), s), cd)
    return make_pointwise(g, [x, scale], lambda ops, a, s: ops.mul(ops.round(ops.truediv(a, s)), s), cd)


def _compare(opname: str):
    @returns_bool
    def fn(ops, x, y):
        return getattr(ops, opname)(x, y)

    def lower(g, a, b):
        common = promoted_dtype(g.fake_arg(0), g.fake_arg(1))
        # a Python scalar is compared after its cast to the common dtype: f16 x == 0.1 compares with
        # f16(0.1), uint8 x < -1 with 255 (the cast of integers happens in broadcast_loader)
        a, b = round_scalar(a, common), round_scalar(b, common)
        return _elementwise(g, [a, b], fn, upcast(common), common)
    return lower


for _op, _name in {aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge", aten.eq: "eq", aten.ne: "ne"}.items():
    register(_op)(_compare(_name))


def _logical(opname: str, nargs: int):
    @returns_bool
    def fn(ops, *xs):
        return getattr(ops, opname)(*xs)

    def lower(g, *args):
        if len(args) != nargs:
            raise Unsupported("arity")
        return make_pointwise(g, list(args), fn, torch.bool)
    return lower


register(aten.logical_and)(_logical("logical_and", 2))
register(aten.logical_or)(_logical("logical_or", 2))
register(aten.logical_xor)(_logical("logical_xor", 2))
register(aten.logical_not)(_logical("logical_not", 1))


@register(aten.bitwise_not)
def _bitwise_not(g, x):
    if g.out.dtype == torch.bool:
        return make_pointwise(g, [x], returns_bool(lambda ops, a: ops.logical_not(a)), torch.bool)
    return make_pointwise(g, [x], lambda ops, a: ops.bitwise_not(a), _compute(g))


@register(aten.isnan, aten.isinf)
def _isnan_isinf(g, x):
    name = g.node.target.overloadpacket.__name__
    src = upcast(x.dtype)
    if not src.is_floating_point:
        return make_pointwise(g, [False], lambda ops, c: c, torch.bool)
    return make_pointwise(g, [x], returns_bool(lambda ops, a: getattr(ops, name)(a)), src)


@register(aten.where)
def _where(g, cond, a, b):
    cd = _compute(g)
    return _elementwise(g, [cond, a, b], lambda ops, c, x, y: ops.where(ops.to_dtype(c, torch.bool), x, y), cd)


# Not decomposed (capture/decompositions.py): their decompositions pick between the inputs with
# `where`, which lays the result out like one input, where eager's TensorIterator orders it by all
# of them (an expanded row beside a transposed tensor; their FakeTensor strides are re-laid out
# in lower/eager_strides.py). Lowered here as eager computes them.
LN2 = 0.6931471805599453


def log_add(ops: Any, x: Any, y: Any, inv_ln2: Any = None) -> Any:
    """log(exp(x) + exp(y)), or in base 2 given the value 1 / ln 2: as eager, x where both are the
    same infinity, else max + log1p(exp(-|x - y|)) (NaN propagates)."""
    d = ops.neg(ops.abs(ops.sub(x, y)))
    tail = ops.mul(ops.log1p(ops.exp2(d)), inv_ln2) if inv_ln2 is not None else ops.log1p(ops.exp(d))
    same_inf = ops.logical_and(ops.isinf(x), ops.eq(x, y))
    return ops.where(same_inf, x, ops.add(ops.maximum(x, y), tail))


def _log_add(base2: bool):
    def body(ops, x, y, inv_ln2):
        return log_add(ops, x, y, inv_ln2 if base2 else None)

    def lower(g, a, b):
        cd = _compute(g)
        if not cd.is_floating_point:
            raise Unsupported("logaddexp of a non-float dtype")
        return _elementwise(g, [a, b, 1.0 / LN2], body, cd)
    return lower


register(aten.logaddexp)(_log_add(base2=False))
register(aten.logaddexp2)(_log_add(base2=True))


@register(aten.addcmul, aten.addcdiv)
def _addc(g, x, t1, t2, value=1):
    """self + value * t1 * t2 (or t1 / t2), rounded once, as eager's kernel computes it."""
    div = g.node.target.overloadpacket is aten.addcdiv
    cd = _compute(g)
    return _elementwise(g, [x, t1, t2, value], lambda ops, a, b, c, v: ops.add(
        a, ops.mul(ops.mul(v, b), c) if not div else ops.mul(v, ops.truediv(b, c))), cd)


@register(aten.heaviside)
def _heaviside(g, x, values):
    cd = _compute(g)
    return _elementwise(g, [x, values, 0], lambda ops, a, v, zero: ops.where(
        ops.eq(a, zero), v, ops.to_dtype(ops.gt(a, zero), cd)), cd)


@register(aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(g, x, lo=None, hi=None):
    packet = g.node.target.overloadpacket
    if packet is aten.clamp_max:
        lo, hi = None, lo
    cd = _compute(g)
    inputs = [x] + [v for v in (lo, hi) if v is not None]

    def fn(ops, v, *bounds):
        bounds = list(bounds)
        if lo is not None:
            v = ops.maximum(v, bounds.pop(0))
        if hi is not None:
            v = ops.minimum(v, bounds.pop(0))
        return v

    return _elementwise(g, inputs, fn, cd)


def _convert(g, x):
    """A dtype conversion. Converting to a half dtype inside a kernel rounds nothing, as in
    Inductor's kernels: the half value is computed in f32 and rounded where it is stored, so the ops
    of a half graph that read it as it is (a residual add after a batch norm's output cast) see more
    precision than eager's. Converting a half value to another dtype converts the half value eager
    holds, so `x.to(half).float()` is x rounded (docs/design.md, "Half precision")."""
    if not hasattr(x, "size"):
        raise Unsupported("scalar convert")
    if g.out.device != x.device:
        raise Unsupported("device copy")
    out, src = g.out.dtype, x.dtype
    if src in LOW_PRECISION and out != src and isinstance(x, Pointwise):
        # a lazy half value is computed in f32 without rounding; converting it to another dtype converts
        # the half value (what eager, and a realized buffer, hold): round it first
        def fn(ops, a):
            a = ops.to_dtype(ops.to_dtype(a, src), torch.float32)
            if out == torch.bool:
                return ops.ne(a, ops.constant(0, torch.float32))
            return ops.to_dtype(a, upcast(out))
        fn.result_dtype = upcast(out)  # type: ignore[attr-defined]
        return make_pointwise(g, [x], fn, torch.float32)
    if out == torch.bool:
        return make_pointwise(g, [x], returns_bool(lambda ops, a: ops.ne(a, ops.constant(0, upcast(src)))), upcast(src))
    return make_pointwise(g, [x], lambda ops, a: a, upcast(out))


@register(aten._to_copy)
def _to_copy(g, x, **kw):
    if kw.get("device") is not None and torch.device(kw["device"]) != x.device:
        raise Unsupported("device copy")
    return _convert(g, x)


@register(prims.convert_element_type)
def _convert_element_type(g, x, dtype):
    return _convert(g, x)


@register(aten.clone, aten.lift_fresh_copy, aten.contiguous, aten.alias_copy, aten.detach_copy)
def _identity(g, x, **kw):
    if _private_buffer(g, x):
        return x
    return make_pointwise(g, [x], lambda ops, a: a, upcast(x.dtype))


def _private_buffer(g: Any, x: Any) -> bool:
    """A clone of a buffer this graph computed, that nothing else reads or returns, in the clone's own
    layout: the buffer itself is the clone (an eval-mode dropout after a linear layer; Inductor
    removes such clones too), where a copy kernel would move its bytes twice."""
    src = g.node.args[0] if g.node.args else None
    if g.node.target not in (aten.clone.default, aten.contiguous.default) or not isinstance(src, torch.fx.Node):
        return False
    while True:   # through views of one use each (a linear layer's output is viewed back to 3-D first)
        if src.op != "call_function" or len(src.users) != 1:
            return False
        if not (isinstance(src.target, torch._ops.OpOverload) and src.target.is_view and src.args
                and isinstance(src.args[0], torch.fx.Node)):
            break
        src = src.args[0]
    base = x.buffer if isinstance(x, ReinterpretView) else x
    if not isinstance(base, (ComputedBuffer, ExternBuffer)) or (isinstance(x, ReinterpretView) and x.layout.offset):
        return False
    # written by the first op that is not a view: a view op run as ATen may share another's storage
    owner = base.kernel.node_id if isinstance(base, ExternBuffer) else base.node_id
    if owner.split(".")[0] != src.name:
        return False
    out = g.out
    return isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.size) and out.dtype == x.dtype \
        and all(a == b for a, b, n in zip(out.stride(), x.layout.stride, out.shape) if n != 1)


@register(aten.alias, aten.detach)
def _alias(g, x):
    """A view of the whole tensor: the value itself (AOTAutograd saves activations through
    `alias`; a copy would cost a kernel per saved activation)."""
    return x


@register(aten.copy)
def _copy(g, dst, src, non_blocking=False):
    if src.device != dst.device:
        raise Unsupported("device copy")
    return _convert(g, src) if tuple(src.size) == tuple(g.out.shape) else make_pointwise(
        g, [src], lambda ops, a: a, upcast(g.out.dtype))


@register(aten.masked_fill)
def _masked_fill(g, x, mask, value):
    cd = _compute(g)
    return make_pointwise(g, [mask, x, value], lambda ops, m, a, v: ops.where(ops.to_dtype(m, torch.bool), v, a), cd)


@register(aten.leaky_relu)
def _leaky_relu(g, x, slope=0.01):
    cd = _compute(g)
    return make_pointwise(g, [x, slope, 0], lambda ops, a, s, z: ops.where(ops.gt(a, z), a, ops.mul(a, s)), cd)


@register(aten.hardtanh)
def _hardtanh(g, x, lo=-1.0, hi=1.0):
    cd = _compute(g)
    return make_pointwise(g, [x, lo, hi], lambda ops, a, l, h: ops.minimum(ops.maximum(a, l), h), cd)
