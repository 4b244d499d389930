"""Per-node expression emission: a node body's math, constants, casts and masks as Triton text.

Note: a node body runs with the KernelWriter as its ops handler; each op becomes one CSE'd line
(emitter.py). A node's value is computed on demand, the first time something reads it, in the
current scope: a load of a buffer produced inside the kernel returns the producer's value
(legality guaranteed it is the same element). Float and integer ops differ where torch's
semantics do (floor division, remainder, NaN-propagating max/min): the templates follow eager.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import sympy
import torch

from ..ir.index import bounds
from ..ir.ops import result_dtype
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .emitter import TV
from .fast_math import fast_tanh
from .printer import tl_dtype
from ..ir.ranges import cast_range, comparison_truth, fold, op_range
from .scan import scan_value

REDUCTION_DEFAULTS = {"sum": 0, "prod": 1, "any": 0, "all": 1}


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def template(name: str, dtype: torch.dtype) -> str:
    """The Triton text of math op `name` on operands of `dtype`: `{0}`, `{1}`... the operands,
    `{T}` the result's Triton dtype."""
    f = is_float(dtype)
    t = {
        "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
        # IEEE division where a truncation follows (Triton's f32 `/` is within 2 ulp on the GPU)
        "div_rn": "tl.math.div_rn({0}, {1})" if dtype == torch.float32 else "{0} / {1}",
        "floordiv": "_floordiv_float({0}, {1})" if f else "_floordiv({0}, {1})",
        "truncdiv": "_trunc({0} / {1})" if f else "{0} // {1}",
        "remainder": "_remainder_float({0}, {1})" if f else "_remainder_int({0}, {1})",
        "fmod": "_fmod({0}, {1})" if f else "{0} % {1}", "neg": "-{0}", "abs": "tl.abs({0})",
        "sign": "({0} > 0).to({T}) - ({0} < 0).to({T})",  # sign(nan) is 0, as in eager
        "reciprocal": "1.0 / {0}", "sqrt": "_sqrt({0})", "rsqrt": "_rsqrt({0})", "exp": "tl.exp({0})",
        "exp2": "tl.exp2({0})", "expm1": "_expm1({0})", "log": "tl.log({0})", "log2": "tl.log2({0})",
        "log10": "_log10({0})",
        "log1p": "_log1p({0})", "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tan": "_tan({0})",
        "tanh": "_tanh({0})", "sigmoid": "1.0 / (1.0 + tl.exp(-{0}))", "erf": "tl.erf({0})", "pow": "_pow({0}, {1})",
        "floor": "tl.floor({0})", "ceil": "tl.ceil({0})", "round": "_round({0})", "trunc": "_trunc({0})",
        "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)" if f else "tl.maximum({0}, {1})",
        "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)" if f else "tl.minimum({0}, {1})",
        "relu": "tl.where({0} < 0, 0, {0})",
        "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
        "bitwise_not": "~{0}", "lshift": "{0} << {1}", "rshift": "{0} >> {1}",
        "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}", "ge": "{0} >= {1}", "eq": "{0} == {1}",
        "ne": "{0} != {1}", "logical_and": "{0} & {1}", "logical_or": "{0} | {1}",
        "logical_xor": "{0} ^ {1}", "logical_not": "{0} == 0",
        "isnan": "{0} != {0}", "isinf": "tl.abs({0}) == float('inf')", "where": "tl.where({0}, {1}, {2})",
        "atan": "_atan({0})", "asin": "_asin({0})", "acos": "_acos({0})", "sinh": "_sinh({0})",
        "cosh": "_cosh({0})", "asinh": "_asinh({0})", "acosh": "_acosh({0})", "atanh": "_atanh({0})", "erfinv": "_erfinv({0})", "lgamma": "_lgamma({0})", "erfc": "_erfc({0})", "atan2": "_atan2({0}, {1})", "hypot": "_hypot({0}, {1})",
        "fma": "{0} * {1} + {2}", "rand": "_rand({0}, {1})", "randn": "_randn({0}, {1})",
        "signbit": ("{0}.to(tl.int64, bitcast=True) < 0" if dtype == torch.float64
                    else "{0}.to(tl.int32, bitcast=True) < 0") if f else "{0} < 0",
    }.get(name)
    if t is None:
        raise NotImplementedError(f"no Triton template for op {name}")
    if name == "bitwise_not" and dtype == torch.uint8:
        # all ones of the dtype (`~` is `x ^ -1`, which Triton 3.7's interpreter cannot cast to uint8)
        t = "{0} ^ tl.full([1], 255, tl.uint8)"
    return t


def literal(value: Any, dtype: torch.dtype) -> str:
    """A Python scalar as Triton source of `dtype` (inf and NaN spelled as float(...))."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if is_float(dtype):
        v = float(value)
        if v != v:
            return 'float("nan")'
        if v in (float("inf"), float("-inf")):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(int(value))


# float8 conversions go through the prelude's helpers: torch's rounding and saturation, by hand; and
# float8 values are read (to float32) through them too: the interpreter reads NaN and infinity wrongly
FLOAT8_CONVERSIONS = {torch.float8_e4m3fn: "_to_f8e4", torch.float8_e5m2: "_to_f8e5"}
FLOAT8_READS = {torch.float8_e4m3fn: "_from_f8e4", torch.float8_e5m2: "_from_f8e5"}


def convert(text: str, dtype: torch.dtype) -> str:
    """Conversion of a value to dtype; bf16 goes through the prelude's correctly rounding helper."""
    if dtype == torch.bfloat16:
        return f"_to_bf16({text})"
    if dtype in FLOAT8_CONVERSIONS:
        return f"{FLOAT8_CONVERSIONS[dtype]}({text})"
    return f"{text}.to({tl_dtype(dtype)})"


def reduction_default(rtype: str, dtype: torch.dtype) -> str:
    """The identity of reduction `rtype` in `dtype`: a masked lane's value and an accumulator's start."""
    if rtype in REDUCTION_DEFAULTS:
        return literal(REDUCTION_DEFAULTS[rtype], dtype)
    lo = rtype in ("max", "argmax")
    if is_float(dtype):
        return 'float("-inf")' if lo else 'float("inf")'
    if dtype == torch.bool:
        return "0" if lo else "1"
    info = torch.iinfo(dtype)
    return str(info.min if lo else info.max)


def exact_inverse(divisor: tuple[float, float] | None) -> str | None:
    """The literal 1 / c for a constant divisor c whose inverse is exact in f32 (a power of two, or
    a zero: an infinity), else None. Multiplying by it is IEEE division, as eager's is; Triton's f32
    `/` on the GPU is an approximation within 2 ulp (a mean over 4 elements, sum / 4, need not be
    eager's), and a multiplication costs less."""
    if divisor is None or divisor[0] != divisor[1]:
        return None
    c = divisor[0]
    if c == 0:
        return 'float("-inf")' if math.copysign(1.0, c) < 0 else 'float("inf")'
    mantissa, exponent = math.frexp(abs(c))
    if mantissa != 0.5 or not -120 < exponent < 120:
        return None
    return repr(1.0 / c)


class ExpressionMixin:
    """KernelWriter's ops-handler methods other than load, and node evaluation (reads the
    writer's state, set in KernelWriter.__init__)."""

    def constant(self, value: Any, dtype: torch.dtype) -> TV:
        # rank of the kernel's blocks: tl.broadcast_to and tl.store do not add leading dims
        shape = "[1, 1]" if self.reduction_kernel or self.tile is not None else "[1]"
        tv = self.cse(f"tl.full({shape}, {literal(value, dtype)}, {tl_dtype(dtype)})", dtype)
        if dtype != torch.bool and math.isfinite(float(value)):
            self.value_ranges[tv.name] = (float(value), float(value))
        return tv

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> TV:
        if not expr.free_symbols:
            return self.constant(int(expr), dtype)
        node, _ = self.current   # index_str needs it too: an index is in its node's loop variables
        text = f"({self.index_str(expr)})"
        if self._needs_opaque_index(text):
            text = f"_opaque_index{text}"
        tv = self.cse(convert(text, dtype), dtype)
        b = bounds(sympy.sympify(expr), dict(zip(node.vars, node.sizes)) | dict(zip(node.rvars, node.rsizes)))
        r = cast_range(None if b is None else (float(b[0]), float(b[1])), torch.int64, dtype)
        if r is not None:
            self.value_ranges[tv.name] = r
        return tv

    def _needs_opaque_index(self, text: str) -> bool:
        """Whether an index value (printed as `text`) is hidden from the GPU compiler's analyses
        (`_opaque_index`): one that floors or takes a remainder of a sum of both block dims of a
        two-dimensional kernel. Why: Triton 3.6 on sm_90 returned wrong lanes for a comparison of
        such a value (a relative-shift gather's bounds) while the same source is exact in the
        interpreter and with the value hidden (docs/design.md, "Testing without a GPU"); offsets
        into memory keep their analysis, which vectorizes loads."""
        if not (self.reduction_kernel or self.tile is not None) or ("//" not in text and "%" not in text):
            return False
        return "xindex" in text and ("rindex" in text or "yindex" in text)

    def to_dtype(self, value: TV, dtype: torch.dtype) -> TV:
        if value.dtype == dtype:
            return value
        if dtype == torch.bool:
            truth = comparison_truth("ne", self.value_ranges.get(value.name), (0.0, 0.0))
            return self.cse(f"({value} != 0)", dtype) if truth is None else self._truth(truth)
        src = f"{FLOAT8_READS[value.dtype]}({value.name})" if value.dtype in FLOAT8_READS else value.name
        tv = self.cse(convert(src, dtype), dtype)
        known = self.known_truth.get(value.name)
        r = (float(known), float(known)) if known is not None else \
            cast_range(self.value_ranges.get(value.name), value.dtype, dtype)
        if r is not None:
            self.value_ranges[tv.name] = r
        return tv

    def masked(self, mask: TV, body: Callable[[], TV], other: Any) -> TV:
        if self.known_truth.get(mask.name):
            return body()   # a mask that holds for every lane (a window inside the tensor)
        self.mask_stack.append(mask.name)
        try:
            result = body()
        finally:
            self.mask_stack.pop()
        if mask.name in self.masked_loads.get(result.name, ()) and other == 0 and \
                math.copysign(1.0, float(other)) > 0:
            return result   # the load's masked-off lanes read 0 already (a pooling window's padding)
        o = self.constant(other, result.dtype)
        return self.cse(f"tl.where({mask}, {result}, {o})", result.dtype)

    def indirect(self, value: TV, size: int) -> sympy.Symbol:
        r = self.value_ranges.get(value.name)
        if r is not None and 0 <= r[0] and r[1] < size:
            # within [0, size): no wrap, and int32 where the kernel's offsets are (ranges.py)
            narrow = value.dtype == torch.int64 and not self.use_int64
            index = self.cse(f"{value}.to(tl.int32)", torch.int32) if narrow else value
        else:
            index = self.cse(f"tl.where({value} < 0, {value} + {size}, {value})", value.dtype)
        sym = sympy.Symbol(index.name, integer=True)
        self.indirect_names[sym] = index.name
        return sym

    def op(self, name: str, *args: TV) -> TV:
        folded = self._folded(name, args)
        if folded is not None:
            return folded
        dtype = result_dtype(name, [a.dtype for a in args])
        src = args[0].dtype
        if name == "tanh" and self.config.fast_tanh and src == torch.float32:
            return self.cse(fast_tanh(args[0].name), dtype)
        text = template(name, src).format(*[a.name for a in args], T=tl_dtype(dtype))
        if name == "truediv" and is_float(src):
            inverse = exact_inverse(self.value_ranges.get(args[1].name))
            if inverse is not None:
                text = f"{args[0].name} * {inverse}"
        tv = self.cse(text, dtype)
        r = op_range(name, [self.value_ranges.get(a.name) for a in args], dtype)
        if r is not None:
            self.value_ranges[tv.name] = r
        return tv

    def _truth(self, truth: bool) -> TV:
        tv = self.constant(truth, torch.bool)
        self.known_truth[tv.name] = truth
        return tv

    def _folded(self, name: str, args: Sequence[TV]) -> TV | None:
        """The op's value where the operands' ranges decide a comparison, or a known boolean
        decides a logical op or a select (`ir/ranges.fold`); None to emit the op."""
        decided = fold(name, [self.known_truth.get(a.name) for a in args],
                       [self.value_ranges.get(a.name) for a in args], [a.dtype for a in args])
        if decided is None:
            return None
        kind, v = decided
        return args[int(v)] if kind == "arg" else self._truth(bool(v))

    def value_of(self, name: str) -> TV:
        hit = self.scope.node_value(name)
        if hit is not None:
            return hit
        node, pl = self.by_buffer[name]
        if pl.cls == "red":
            raise RuntimeError(f"reduction {name} used before its loop finished")
        saved = self.current
        self.current = (node, pl)
        try:
            value = scan_value(self, node) if node.kind == "scan" else node.run_body(self)
        finally:
            self.current = saved
        self.scope.node_values[name] = value
        return value

    def emit_pointwise(self, node: SchedulerNode, pl: Placement) -> None:
        self.store(node, pl, self.value_of(node.name))
