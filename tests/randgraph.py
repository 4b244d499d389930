"""Seeded random PyTorch programs for differential testing (compiled vs eager).

`make_case(seed)` builds a small program — a DAG of pointwise math, reductions with broadcast
epilogues, views, casts and multi-use intermediates over 1-3 (sometimes non-contiguous) inputs —
and returns `(fn, args, source)`. `source` is a self-contained Python script that rebuilds the
very same inputs and defines the very same function, so a failing seed can be replayed by hand:

    python3 -c "from tests.randgraph import make_case; print(make_case(17)[2])"

How programs stay comparable with eager:
  * every statement is executed eagerly while the program is generated (on the real inputs), so
    shapes, dtypes and type promotion are torch's own, invalid statements are simply dropped, and
    values that are non-finite or large are dropped too;
  * each value carries two flags. `exact`: a fused kernel computes bit-identical results (inputs,
    views, selections, exact integer / f32 add-sub-mul, comparisons of exact values...).
    `noisy`: a low-precision value that eager rounds after every op while a kernel keeps it in f32.
    Discontinuous ops (floor, round, remainder, float->int casts) take exact operands only;
    comparisons, argmax and sign never take noisy operands, and noisy values only ever flow into
    low-precision results (a kernel's unrounded f16 intermediate would otherwise show up at f32
    tolerance);
  * finally the program is re-run with every statement that introduces rounding error perturbed
    by a few ulps (one f16/bf16 ulp for low-precision results); if any output moves by more than
    half of tests/helpers.py's tolerance (or an integer/bool output changes at all) the draft is
    numerically ill-conditioned and a new draft is drawn from the same seeded stream. This looks
    at eager only, never at the compiler.

`make_training_case(seed)` takes, from the same seeded drafts, the first program to train through
(tests/randgraph_train.py: float32/float64 inputs as leaves, autograd.grad of the float outputs): a
draft counts only if such a backward reaches a computed output and its gradients are
well-conditioned too: the forward statements are perturbed as above and, in the backward, every
gradient flowing into a statement's result is moved by a few ulps of its dtype, which stands for
the rounding of a fused backward kernel; where a max/min tie, a kink of abs/relu/clamp or a where's
boundary sits within that noise, the gradients move by more than half the tolerance and the next
draft is taken. Again eager only.
"""
from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from tests.helpers import TOLERANCES, rand
from tests.randgraph_train import grads_agree, training_step

LOWP = (torch.float16, torch.bfloat16)
INTS = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)
MAX_NUMEL = 2048
FLOAT_CAP = 1.0e3
INT_CAP = 1.0e6

DTYPE_SRC = {
    torch.float32: "torch.float32", torch.float16: "torch.float16", torch.bfloat16: "torch.bfloat16",
    torch.float64: "torch.float64", torch.int32: "torch.int32", torch.int64: "torch.int64",
    torch.bool: "torch.bool", torch.int16: "torch.int16", torch.int8: "torch.int8", torch.uint8: "torch.uint8",
}

# kinds of statements: how much error they introduce relative to eager, see Val
SELECT, ARITH, MATH, REDUCE, CAST, COMPARE, DISCONT = "select", "arith", "math", "reduce", "cast", "compare", "discont"
# a discontinuous op that itself rounds (float remainder, round to decimals): exact operand, inexact result
DISCONT_MATH = "discont_math"


@dataclass
class Val:
    name: str
    t: torch.Tensor          # the eager value on the case's inputs
    exact: bool              # a kernel computes it bit-for-bit like eager
    noisy: bool              # low-precision rounding differences vs a kernel
    is_input: bool = False
    nonfinite: bool = False  # may hold NaN / inf (only in programs drawn with NaN/inf inputs)
    uses: int = 0
    order: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.t.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.t.dtype

    @property
    def ndim(self) -> int:
        return self.t.dim()

    @property
    def is_float(self) -> bool:
        return self.t.dtype.is_floating_point

    @property
    def is_int(self) -> bool:
        return self.t.dtype in INTS

    @property
    def is_bool(self) -> bool:
        return self.t.dtype == torch.bool


def _lo(t: torch.Tensor) -> float:
    return float(t.min()) if t.numel() else math.inf


def _hi(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else -math.inf


def _fmt_dims(dims: list[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def _float_lit(x: float) -> str:
    return repr(float(x))


class Builder:
    """One draft program: inputs, statements (executed as they are drawn), outputs."""

    def __init__(self, seed: int, rng: random.Random, attempt: int, nonfinite: float = 0.1) -> None:
        self.seed, self.rng, self.attempt = seed, rng, attempt
        self.ns: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}
        self.vals: list[Val] = []
        self.inputs: list[Val] = []
        self.input_src: list[str] = []
        # (name, expr, perturbation mode of the result, operands to perturb before evaluating)
        self.lines: list[tuple[str, str, str | None, tuple[str, ...]]] = []
        self.counter = 0
        self.outputs: list[str] = []
        self.torch_seed = seed * 1000 + attempt
        self.nonfinite_ok = rng.random() < nonfinite   # a program over NaN / inf inputs

    # ---- inputs -----------------------------------------------------------------------------
    def _base_shape(self) -> tuple[int, ...]:
        r = self.rng
        ndim = r.choices([1, 2, 3], [2, 5, 3])[0]
        shape = []
        budget = MAX_NUMEL // 2
        for k in range(ndim):
            remaining = ndim - k - 1
            hi = max(3, min(40, budget // (3 ** remaining)))
            if r.random() < 0.12:
                s = r.choice([c for c in (4, 8, 16, 32) if c <= hi] or [4])
            elif r.random() < 0.06:
                s = r.choice([1, 2])
            elif k > 0 and r.random() < 0.25 and shape[0] <= hi:
                s = shape[0]          # square-ish: transposed reads broadcast
            else:
                s = r.randint(3, hi)
            shape.append(s)
            budget //= s
        return tuple(shape)

    def make_inputs(self) -> None:
        r = self.rng
        base = self._base_shape()
        main = r.choices([torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.float64,
                          torch.int16, torch.int8, torch.uint8],
                         [60, 12, 10, 8, 8, 3, 1, 1, 1])[0]
        n = r.choices([1, 2, 3], [3, 4, 3])[0]
        gen = torch.Generator().manual_seed(self.torch_seed)
        self.ns["gen"] = gen
        self.ns["rand"] = rand
        self.ns["DEVICE"] = "cpu"
        for i in range(n):
            shape = list(base)
            if i > 0 and r.random() < 0.45:   # a broadcasting partner
                if r.random() < 0.1:
                    shape = []
                elif len(shape) > 1 and r.random() < 0.4:
                    shape = shape[r.randint(1, len(shape) - 1):]
                else:
                    k = r.randrange(len(shape))
                    shape[k] = 1
            dtype = main if r.random() < 0.8 else r.choice(
                [torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool])
            rng_args = ""
            if dtype.is_floating_point and r.random() < 0.15:
                rng_args = ", low=0.25, high=2.0"
            dt = DTYPE_SRC[dtype]
            style = r.random()
            if style < 0.2 and len(shape) >= 1:
                src = f"rand({tuple(shape)}, {dt}, DEVICE, noncontig=True{rng_args}, gen=gen)"
            elif style < 0.28 and len(shape) >= 1:
                k = r.randrange(len(shape))
                big = list(shape)
                big[k] += 3
                idx = ", ".join([":"] * k + [f"1:{shape[k] + 1}"])
                src = f"rand({tuple(big)}, {dt}, DEVICE{rng_args}, gen=gen)[{idx}]"
            elif style < 0.33 and len(shape) >= 3:
                perm = list(range(len(shape)))
                while perm == sorted(perm):
                    r.shuffle(perm)
                inv = [perm.index(k) for k in range(len(shape))]
                stored = tuple(shape[p] for p in perm)
                src = f"rand({stored}, {dt}, DEVICE{rng_args}, gen=gen).permute{tuple(inv)}"
            elif style < 0.37 and len(shape) >= 2 and shape[0] > 1:
                one = [1] + shape[1:]
                src = f"rand({tuple(one)}, {dt}, DEVICE{rng_args}, gen=gen).expand{tuple(shape)}"
            else:
                src = f"rand({tuple(shape)}, {dt}, DEVICE{rng_args}, gen=gen)"
            name = f"a{i}"
            self.input_src.append(f"{name} = {src}")
            t = eval(src, self.ns)
            self.ns[name] = t
            nonfinite = False
            if self.nonfinite_ok and dtype.is_floating_point and ".expand" not in src and r.random() < 0.7:
                # about 10% NaN and 5% +-inf, written in place so the input keeps its layout
                for value, lo in (('float("nan")', 2.4), (r.choice(['float("inf")', 'float("-inf")']), 2.7)):
                    fill = f"{name}.masked_fill_(rand({tuple(shape)}, torch.float32, DEVICE, gen=gen) > {lo}, {value})"
                    self.input_src.append(fill)
                    eval(fill, self.ns)
                nonfinite = True
            v = Val(name, t, exact=True, noisy=False, is_input=True, order=len(self.vals), nonfinite=nonfinite)
            self.vals.append(v)
            self.inputs.append(v)

    # ---- statements ---------------------------------------------------------------------------
    def emit(self, expr: str, operands: list[Val], kind: str, inline: tuple[Val, ...] = ()) -> Val | None:
        """Run `vN = expr` eagerly; keep it if it is a tame tensor, with its flags. `inline`: operands
        that go through math inside expr (e.g. y in `x / (y.abs() + 1)`): in f16/bf16 eager rounds
        that intermediate, a kernel does not, so it counts as noisy."""
        noisy_in = any(o.noisy or o.dtype in LOWP for o in inline) or any(o.noisy for o in operands)
        exact_in = all(o.exact for o in operands)
        if kind == COMPARE and noisy_in:
            return None
        if kind in (DISCONT, DISCONT_MATH) and not exact_in:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = eval(expr, self.ns)
        except Exception:  # noqa: BLE001 - an invalid draw is simply not taken
            return None
        if not isinstance(out, torch.Tensor) or out.dtype not in DTYPE_SRC:
            return None
        if out.numel() > MAX_NUMEL or out.dim() > 4:
            return None
        nonfinite = any(o.nonfinite for o in operands)
        if nonfinite and kind == DISCONT and out.dtype in INTS and any(o.is_float for o in operands):
            return None   # float -> int of NaN / inf is undefined
        if out.numel() == 0:
            pass
        elif out.is_floating_point():
            finite = torch.isfinite(out)
            if not self.nonfinite_ok and not bool(finite.all()):
                return None
            if _hi(out[finite].abs()) > FLOAT_CAP:
                return None
        elif out.dtype != torch.bool and float(out.abs().max()) > INT_CAP:
            return None
        lowp_out = out.dtype in LOWP
        exact, noisy, mode = exact_in, noisy_in, None
        if kind == ARITH:
            if lowp_out:
                exact, noisy, mode = False, True, "lowp"
        elif kind in (MATH, REDUCE, DISCONT_MATH):
            if out.is_floating_point():
                exact = False
                if lowp_out:
                    noisy, mode = True, "lowp"
                else:
                    mode = "f32" if kind == MATH else "f32red"
        elif kind == CAST:
            if lowp_out and not exact_in:
                noisy = True  # an f32 value near a rounding boundary may round either way
        elif kind == COMPARE:
            pass
        elif kind == DISCONT:
            exact = True
        if noisy and not lowp_out:
            return None
        name = f"v{self.counter}"
        self.counter += 1
        self.ns[name] = out
        for o in operands:
            o.uses += 1
        v = Val(name, out, exact, noisy, order=len(self.vals), nonfinite=nonfinite)
        self.vals.append(v)
        # a reduction's own rounding (order, internal mean/var) also shows as a perturbed input
        pin = tuple(o.name for o in operands if o.dtype in (torch.float32, torch.float64)) if kind == REDUCE else ()
        self.lines.append((name, expr, mode, pin))
        return v

    # ---- picking operands ------------------------------------------------------------------------
    def pick(self, pred: Callable[[Val], bool] = lambda v: True) -> Val | None:
        cands = [v for v in self.vals if pred(v)]
        if not cands:
            return None
        n = len(self.vals)
        weights = []
        for v in cands:
            w = 1.0 + 3.0 * (v.order + 1) / n
            if v.is_input and self.counter > 2:
                w *= 0.5
            if 1 <= v.uses <= 2:
                w *= 1.6
            weights.append(w)
        return self.rng.choices(cands, weights)[0]

    def partner(self, a: Val, pred: Callable[[Val], bool] = lambda v: True) -> Val | None:
        """A value broadcast-compatible with a (possibly a itself)."""
        def ok(v: Val) -> bool:
            if not pred(v):
                return False
            try:
                s = torch.broadcast_shapes(a.shape, v.shape)
            except RuntimeError:
                return False
            return math.prod(s) <= MAX_NUMEL
        return self.pick(ok)

    # ---- moves ------------------------------------------------------------------------------
    def move_unary_float(self) -> None:
        a = self.pick(lambda v: v.is_float)
        if a is None:
            return
        t = a.t.float()
        x = a.name
        mx, mn = _hi(t), _lo(t)
        amin = _lo(t.abs())
        opts: list[tuple[str, str]] = [
            (f"torch.tanh({x})", MATH), (f"torch.sigmoid({x})", MATH), (f"torch.sin({x})", MATH),
            (f"torch.cos({x})", MATH), (f"torch.exp(-{x}.abs())", MATH), (f"torch.log({x}.abs() + 1)", MATH),
            (f"torch.log1p({x}.abs())", MATH), (f"torch.sqrt({x}.abs() + 0.25)", MATH),
            (f"torch.rsqrt({x}.abs() + 1)", MATH), (f"torch.erf({x})", MATH), (f"torch.expm1(torch.tanh({x}))", MATH),
            (f"torch.reciprocal({x}.abs() + 1)", MATH), (f"F.silu({x})", MATH), (f"F.gelu({x})", MATH),
            (f"F.softplus({x})", MATH), (f"F.elu({x})", MATH), (f"{x} / 3.0", MATH), (f"{x} ** 3", MATH),
            (f"torch.pow({x}.abs() + 0.5, 1.5)", MATH), (f"{x} * {x}", ARITH), (f"{x} * 0.75 - 0.5", ARITH),
            (f"2.0 - {x}", ARITH), (f"-{x}", SELECT), (f"torch.abs({x})", SELECT), (f"torch.relu({x})", SELECT),
            (f"{x}.clamp(-1.5, 2.0)", SELECT), (f"{x}.clamp(min=0.25)", SELECT), (f"F.leaky_relu({x}, 0.1)", MATH),
            (f"F.hardtanh({x}, -0.5, 1.0)", SELECT), (f"torch.sign({x})", COMPARE),
            (f"torch.floor({x})", DISCONT), (f"torch.ceil({x} * 2.0)", DISCONT), (f"torch.round({x})", DISCONT),
            (f"torch.trunc({x})", DISCONT), (f"torch.frac({x})", DISCONT),
            (f"torch.remainder({x}, 1.5)", DISCONT_MATH), (f"torch.fmod({x}, 1.25)", DISCONT),
            (f"torch.atan({x})", MATH),
            (f"torch.asin(torch.tanh({x}) * 0.9)", MATH), (f"torch.acos(torch.tanh({x}) * 0.9)", MATH),
            (f"torch.erfc({x})", MATH), (f"torch.tan(torch.tanh({x}))", MATH),
        ]
        if mx <= 6.0 and mn >= -6.0:
            opts += [(f"torch.sinh({x})", MATH), (f"torch.cosh({x})", MATH)]
        if a.dtype not in LOWP:   # eager CUDA scales f16/bf16 by 10 in half precision (CPU in f32)
            opts.append((f"torch.round({x}, decimals=1)", DISCONT_MATH))
        if mx <= 5.0:
            opts.append((f"torch.exp({x})", MATH))
        if mn >= 0.25:
            opts += [(f"torch.log({x})", MATH), (f"torch.rsqrt({x})", MATH), (f"torch.log2({x})", MATH)]
        if mn >= 0.01:
            opts.append((f"torch.sqrt({x})", MATH))
        if amin >= 0.5:
            opts += [(f"1.0 / {x}", MATH), (f"torch.reciprocal({x})", MATH)]
        expr, kind = self.rng.choice(opts)
        if a.nonfinite and expr.startswith("F.gelu("):
            return   # eager's vectorized CPU gelu gives nan for +inf (f32, and f16/bf16 through it), a kernel +inf
        self.emit(expr, [a], kind)

    def move_unary_int(self) -> None:
        a = self.pick(lambda v: v.is_int)
        if a is None:
            return
        x = a.name
        expr, kind = self.rng.choice([
            (f"-{x}", SELECT), (f"{x}.abs()", SELECT), (f"{x} * 3", ARITH), (f"{x} + 7", ARITH),
            (f"{x} // 3", DISCONT), (f"{x} % 4", DISCONT), (f"torch.remainder({x}, -3)", DISCONT),
            (f"torch.div({x}, 4, rounding_mode='trunc')", DISCONT), (f"torch.div({x}, -4, rounding_mode='floor')", DISCONT),
            (f"torch.bitwise_not({x})", ARITH), (f"{x} & 5", ARITH), (f"{x} ^ 3", ARITH), (f"{x} | 2", ARITH),
            (f"{x}.clamp(-3, 4)", SELECT), (f"{x} << 1", ARITH), (f"{x} >> 1", ARITH), (f"{x} / 2", MATH),
            (f"torch.sign({x})", COMPARE), (f"{x} * {x}", ARITH), (f"torch.maximum({x}, torch.zeros_like({x}))", SELECT),
        ])
        self.emit(expr, [a], kind)

    def move_unary_bool(self) -> None:
        a = self.pick(lambda v: v.is_bool)
        if a is None:
            return
        x = a.name
        expr, kind = self.rng.choice([
            (f"~{x}", SELECT), (f"{x}.float()", CAST), (f"{x}.int()", CAST), (f"torch.where({x}, 1.5, -0.5)", SELECT),
            (f"{x}.long() * 3", ARITH), (f"{x}.to(torch.float16)", CAST), (f"torch.logical_not({x})", SELECT),
        ])
        self.emit(expr, [a], kind)

    def move_binary(self) -> None:
        r = self.rng
        a = self.pick(lambda v: not v.is_bool or r.random() < 0.3)
        if a is None:
            return
        if r.random() < 0.25:   # with a Python scalar or a creation op
            x = a.name
            if a.is_bool:
                expr, kind = r.choice([(f"{x} & (torch.ones_like({x}))", SELECT), (f"{x} * 2.5", ARITH)])
            elif a.is_int:
                expr, kind = r.choice([(f"{x} + 2", ARITH), (f"{x} * -2", ARITH), (f"{x} - 1.5", ARITH),
                                       (f"{x} * 0.5", ARITH), (f"torch.full_like({x}, 3) - {x}", ARITH)])
            else:
                opts = [(f"{x} + 1.5", ARITH), (f"{x} * -0.75", ARITH), (f"0.5 - {x}", ARITH), (f"{x} * 2", ARITH),
                        (f"torch.add({x}, 1.0, alpha=0.5)", ARITH), (f"{x} - torch.ones_like({x})", ARITH)]
                if a.ndim >= 1:
                    n = a.shape[-1]
                    opts.append((f"{x} * torch.arange({n}, device={x}.device, dtype=torch.float32) / {n}", MATH))
                    opts.append((f"{x} + torch.arange({n}, device={x}.device)", ARITH))
                expr, kind = r.choice(opts)
            self.emit(expr, [a], kind)
            return
        if a.is_bool:
            b = self.partner(a, lambda v: v.is_bool)
            if b is None:
                return
            expr = r.choice([f"{a.name} & {b.name}", f"{a.name} | {b.name}", f"{a.name} ^ {b.name}",
                             f"torch.logical_and({a.name}, {b.name})", f"torch.logical_or({a.name}, {b.name})"])
            self.emit(expr, [a, b], SELECT)
            return
        b = self.partner(a, lambda v: not v.is_bool or r.random() < 0.2)
        if b is None:
            return
        x, y = a.name, b.name
        opts = [(f"{x} + {y}", ARITH), (f"{x} - {y}", ARITH), (f"{x} * {y}", ARITH),
                (f"torch.maximum({x}, {y})", SELECT), (f"torch.minimum({x}, {y})", SELECT),
                (f"torch.where({x} > {y}, {x}, {y})", COMPARE),
                (f"torch.sub({x}, {y}, alpha=2)", ARITH)]
        if a.is_float or b.is_float:
            opts.append((f"torch.addcmul({x}, {x}, {y}, value=0.5)", ARITH))
            opts += [(f"{x} / ({y}.abs() + 1)", MATH, (b,)), (f"{x} * torch.sigmoid({y})", MATH, (b,))]
            if _lo(b.t.float().abs()) >= 0.5:
                opts.append((f"{x} / {y}", MATH))
        if a.is_int and b.is_int:
            opts += [(f"{x} & {y}", ARITH), (f"{x} | {y}", ARITH), (f"{x} ^ {y}", ARITH),
                     (f"torch.remainder({x}, {y}.abs() + 1)", DISCONT), (f"{x} // ({y}.abs() + 1)", DISCONT)]
        expr, kind, *inline = r.choice(opts)
        self.emit(expr, [a, b], kind, *inline)

    def move_compare_where(self) -> None:
        r = self.rng
        a = self.pick(lambda v: not v.is_bool and not v.noisy)
        if a is None:
            return
        if r.random() < 0.4:
            b = None
            rhs = "0" if a.is_int else _float_lit(r.choice([0.0, 0.5, -0.25, 1.0]))
        else:
            b = self.partner(a, lambda v: not v.is_bool and not v.noisy and v is not a)
            if b is None:
                return
            rhs = b.name
        op = r.choice([">", "<", ">=", "<=", "==", "!="] if (a.is_int or (b is not None and b is a)) else [">", "<", ">=", "<="])
        cond = self.emit(f"{a.name} {op} {rhs}", [a] + ([b] if b is not None else []), COMPARE)
        if cond is None:
            return
        x = self.partner(cond, lambda v: not v.is_bool)
        if x is None:
            return
        style = r.random()
        if style < 0.3:
            self.emit(f"{x.name}.masked_fill({cond.name}, {_float_lit(r.choice([0.0, -1.0, 2.5])) if x.is_float else 0})",
                      [x, cond], SELECT)
        elif style < 0.5:
            self.emit(f"torch.where({cond.name}, {x.name}, {_float_lit(r.choice([0.0, 1.0])) if x.is_float else 1})",
                      [x, cond], SELECT)
        else:
            y = self.partner(cond, lambda v: not v.is_bool)
            if y is None:
                return
            self.emit(f"torch.where({cond.name}, {x.name}, {y.name})", [cond, x, y], SELECT)

    def move_cast(self) -> None:
        r = self.rng
        a = self.pick()
        if a is None:
            return
        x = a.name
        if a.is_float:
            opts = [(f"{x}.float()", CAST), (f"{x}.half()", CAST), (f"{x}.bfloat16()", CAST),
                    (f"{x}.to(torch.float16).to(torch.float32)", CAST), (f"({x} > 0).float()", COMPARE),
                    (f"{x}.to(torch.int32)", DISCONT), (f"{x}.long()", DISCONT), (f"{x}.bool()", COMPARE)]
        elif a.is_int:
            opts = [(f"{x}.float()", CAST), (f"{x}.to(torch.float16)", CAST), (f"{x}.to(torch.int32)", CAST),
                    (f"{x}.long()", CAST), (f"{x}.bool()", COMPARE), (f"{x}.to(torch.bfloat16)", CAST)]
        else:
            opts = [(f"{x}.float()", CAST), (f"{x}.long()", CAST), (f"{x}.to(torch.bfloat16)", CAST)]
        expr, kind = r.choice(opts)
        self.emit(expr, [a], kind)

    def _reduce_dims(self, a: Val) -> list[int] | None:
        r = self.rng
        if a.ndim == 0:
            return None
        if r.random() < 0.6:
            d = r.randrange(a.ndim)
            return [d - a.ndim if r.random() < 0.5 else d]
        k = r.randint(1, a.ndim)
        return sorted(r.sample(range(a.ndim), k))

    def move_reduction(self) -> None:
        r = self.rng
        a = self.pick(lambda v: v.ndim >= 1)
        if a is None:
            return
        x = a.name
        keep = r.random() < 0.55
        full = r.random() < 0.1
        dims = self._reduce_dims(a)
        if dims is None:
            return
        ds, kd = _fmt_dims(dims), f", keepdim={keep}"
        one = dims[0]
        rtype = None
        if a.is_bool:
            choices = [(f"{x}.any({one}{kd})", SELECT, "any"), (f"{x}.all({one}{kd})", SELECT, "all"),
                       (f"{x}.sum({ds}{kd})", SELECT, "sum")]
        elif a.is_int:
            choices = [(f"{x}.sum({ds}{kd})", SELECT, "sum"), (f"{x}.amax({ds}{kd})", SELECT, "amax"),
                       (f"{x}.amin({ds}{kd})", SELECT, "amin"), (f"{x}.argmax({one}{kd})", SELECT, "argmax"),
                       (f"{x}.max({one}{kd}).values", SELECT, "amax"), (f"{x}.float().mean({ds}{kd})", REDUCE, "mean")]
            if full:
                choices = [(f"{x}.sum()", SELECT, "sum"), (f"{x}.amax()", SELECT, "amax")]
        else:
            choices = [(f"{x}.sum({ds}{kd})", REDUCE, "sum"), (f"{x}.mean({ds}{kd})", REDUCE, "mean"),
                       (f"{x}.mean({ds}{kd})", REDUCE, "mean"), (f"{x}.amax({ds}{kd})", SELECT, "amax"),
                       (f"{x}.amin({ds}{kd})", SELECT, "amin"),
                       (f"{x}.var({ds}, correction={r.choice([0, 1])}{kd})", REDUCE, "var"),
                       (f"{x}.std({one}{kd})", REDUCE, "var"),
                       (f"{x}.argmax({one}{kd})", COMPARE, "argmax"), (f"{x}.argmin({one}{kd})", COMPARE, "argmax"),
                       (f"{x}.max({one}{kd}).values", SELECT, "amax"), (f"{x}.min({one}{kd}).indices", COMPARE, "argmax"),
                       (f"torch.logsumexp({x}, {ds}{kd})", REDUCE, "lse"),
                       (f"{x}.sum({ds}{kd}, dtype=torch.float32)", REDUCE, "sum")]
            if a.shape[one] != 1:   # torch 2.11's linalg_vector_norm decomposition keeps a size-1 dim
                choices.append((f"{x}.norm(dim={one}{kd})", REDUCE, "norm"))
            if math.prod(a.shape[d] for d in dims) <= 6 and _hi(a.t.float().abs()) <= 2:
                choices.append((f"{x}.prod({one}{kd})", REDUCE, "prod"))
            if full:
                choices = [(f"{x}.sum()", REDUCE, "sum"), (f"{x}.mean()", REDUCE, "mean"), (f"{x}.amax()", SELECT, "amax"),
                           (f"{x}.var()", REDUCE, "var"), (f"{x}.argmax()", COMPARE, "argmax")]
        expr, kind, rtype = r.choice(choices)
        red = self.emit(expr, [a], kind)
        if red is None or r.random() > 0.7 or rtype == "argmax":
            if red is not None and rtype == "argmax" and keep and a.ndim >= 1 and r.random() < 0.5 and not full:
                self.emit(f"torch.gather({x}, {one}, {red.name})", [a, red], SELECT)
            return
        self.epilogue(a, red, dims, keep or full, rtype)

    def epilogue(self, a: Val, red: Val, dims: list[int], keepdim: bool, rtype: str) -> None:
        """A broadcast consumer of a and its reduction (the x - x.mean(-1, keepdim=True) shape)."""
        r = self.rng
        R = red.name
        if not keepdim and red.ndim > 0:
            nd = a.ndim
            pos = sorted(d % nd for d in dims)
            if pos != list(range(len(pos))) or r.random() < 0.5:   # not only leading dims: unsqueeze back
                for d in pos:
                    R = f"{R}.unsqueeze({d})"
        if r.random() < 0.2 and a.ndim >= 2:
            # read the reduced value along another dim than the one it was reduced from (a square
            # shape makes that broadcast: the kernel must not take it for the same element)
            i, j = r.sample(range(a.ndim), 2)
            R = f"{R}.transpose({i}, {j})"
        x = a.name
        if a.is_bool:
            return
        if a.is_int or red.is_int:
            opts = [(f"{x} - {R}", ARITH), (f"{x} * {R}", ARITH), (f"({x} == {R}).float()", COMPARE)]
        else:
            opts = [(f"{x} - {R}", ARITH), (f"({x} - {R}) * 0.5", ARITH),
                    (f"{x} * {R}", ARITH), (f"torch.where({x} > {R}, {x}, -{x})", COMPARE)]
            opts.append((f"{x} / ({R}.abs() + 1)", MATH, (red,)))
            if rtype in ("amax",):
                opts += [(f"torch.exp({x} - {R})", MATH), (f"({x} == {R}).float()", COMPARE)]
            if rtype in ("sum", "lse", "norm", "mean") and _lo(red.t.float().abs()) >= 0.5:
                opts.append((f"{x} / {R}", MATH))
            if rtype == "var":
                opts.append((f"{x} * torch.rsqrt({R} + 1e-5)", MATH, (red,)))
        expr, kind, *inline = r.choice(opts)
        e = self.emit(expr, [a, red], kind, *inline)
        if e is not None and r.random() < 0.3:   # and the epilogue feeds a second reduction
            self.emit(f"{e.name}.sum({_fmt_dims(dims)}, keepdim={keepdim})", [e],
                      REDUCE if e.is_float else SELECT)

    def move_composite(self) -> None:
        r = self.rng
        a = self.pick(lambda v: v.is_float and v.ndim >= 1)
        if a is None:
            return
        x = a.name
        d = r.randrange(a.ndim) - (a.ndim if r.random() < 0.5 else 0)
        style = r.randrange(15)
        if style == 0:
            self.emit(f"torch.softmax({x}, {d})", [a], REDUCE)
        elif style == 1:
            self.emit(f"torch.log_softmax({x}, {d})", [a], REDUCE)
        elif style == 2:
            k = r.randint(1, a.ndim)
            self.emit(f"F.layer_norm({x}, {tuple(a.shape[a.ndim - k:])}{self._affine(a, k, True)})", [a], REDUCE)
        elif style == 3:   # hand-written layer norm: two reductions of x, both feeding the epilogue
            m = self.emit(f"{x}.mean({d}, keepdim=True)", [a], REDUCE)
            if m is None:
                return
            c = self.emit(f"{x} - {m.name}", [a, m], ARITH)
            if c is None:
                return
            v = self.emit(f"({c.name} * {c.name}).mean({d}, keepdim=True)", [c], REDUCE)
            if v is None:
                return
            self.emit(f"{c.name} * torch.rsqrt({v.name} + 1e-5)", [c, v], MATH)
        elif style == 4:   # softmax by hand
            m = self.emit(f"{x}.amax({d}, keepdim=True)", [a], SELECT)
            if m is None:
                return
            e = self.emit(f"torch.exp({x} - {m.name})", [a, m], MATH)
            if e is None:
                return
            s = self.emit(f"{e.name}.sum({d}, keepdim=True)", [e], REDUCE)
            if s is None:
                return
            self.emit(f"{e.name} / {s.name}", [e, s], MATH)
        elif style == 5:   # l2 normalize
            self.emit(f"{x} / ({x} * {x}).sum({d}, keepdim=True).sqrt().clamp(min=1e-3)", [a], REDUCE)
        elif style == 6:   # a loss: log-softmax, a gather through the argmin's indices, a mean
            if a.ndim == 2 and not a.noisy:
                self.emit(f"F.cross_entropy({x}, {x}.argmin(-1))", [a], REDUCE)
        elif style == 7:
            self.emit(f"F.rms_norm({x}, ({a.shape[-1]},){self._affine(a, 1, False)})", [a], REDUCE)
        elif style == 8:   # both results of one var_mean
            self.emit(f"(lambda vm: (vm[0] + 1) * vm[1])(torch.var_mean({x}, {d}, keepdim=True))", [a], REDUCE)
        elif style == 9:   # two chained reductions over different dims, both broadcast back
            d2 = r.randrange(a.ndim)
            m = self.emit(f"{x}.mean({d}, keepdim=True)", [a], REDUCE)
            if m is None:
                return
            c = self.emit(f"({x} - {m.name}).abs().amax({d2}, keepdim=True)", [a, m], ARITH)
            if c is None:
                return
            self.emit(f"({x} - {m.name}) / ({c.name} + 1)", [a, m, c], MATH)
        elif style == 10:  # a reduction of one value broadcast into another value
            red = self.emit(f"{x}.{r.choice(['sum', 'mean', 'amax'])}({d}, keepdim=True)", [a], REDUCE)
            if red is None:
                return
            b = self.partner(red, lambda v: not v.is_bool and v is not a)
            if b is not None:
                self.emit(f"{b.name} * 0.5 - {red.name}", [b, red], ARITH)
        elif style == 11:
            b = self.partner(a, lambda v: v.is_float and v.shape == a.shape)
            if b is not None:
                self.emit(r.choice([f"torch.lerp({x}, {b.name}, 0.3)", f"F.mse_loss({x}, {b.name})",
                                    f"torch.clamp({x}, min={b.name})", f"torch.clamp({x}, max={b.name} + 0.5)"]),
                          [a, b], REDUCE, (b,))
        elif style == 12:  # reduce a permuted view, epilogue through the same view
            if a.ndim >= 2:
                perm = list(range(a.ndim))
                r.shuffle(perm)
                v = self.emit(f"{x}.permute{tuple(perm)}", [a], SELECT)
                if v is None:
                    return
                k = r.randrange(a.ndim)
                sm = self.emit(f"{v.name}.sum({k}, keepdim=True)", [v], REDUCE)
                if sm is not None:
                    self.emit(f"{v.name} - {sm.name} / {a.shape[perm[k]]}", [v, sm], MATH)
        else:              # a long inline chain of elementwise math (many ops in one body)
            expr, cur = x, a
            for _ in range(r.randint(4, 9)):
                e = cur.name if cur.dtype in LOWP else expr   # (f16/bf16: one statement per step, each
                expr = r.choice([f"torch.sin({e})", f"torch.tanh({e} * 1.5)", f"({e} * 0.5 + 0.25)",   # rounded)
                                 f"torch.sigmoid({e})", f"({e} - {x} * 0.125)", f"torch.cos({e})",
                                 f"torch.where({e} > 0, {e}, {e} * 0.1)"])
                if cur.dtype in LOWP:
                    cur = self.emit(expr, [cur, a], MATH)
                    if cur is None:
                        return
            if a.dtype not in LOWP:
                self.emit(expr, [a], MATH)

    def _affine(self, a: Val, k: int, bias: bool) -> str:
        """A norm's weight (and bias) over a's last k dims, half the time: rows of a itself, so a
        training step's backward sums the norm's gradient down its columns (column partials)."""
        if self.rng.random() < 0.5 or a.ndim <= k:
            return ""
        rows = f"{a.name}.flatten(0, {a.ndim - k - 1})" if a.ndim - k > 1 else a.name
        weight = f"{rows}[0] * 0.5 + 1.0"
        return f", {weight}, {rows}[-1] * 0.25" if bias else f", {weight}"

    def move_view(self) -> None:
        r = self.rng
        a = self.pick()
        if a is None:
            return
        x, sh, nd = a.name, a.shape, a.ndim
        opts: list[str] = []
        if nd >= 2:
            perm = list(range(nd))
            r.shuffle(perm)
            i, j = r.sample(range(nd), 2)
            opts += [f"{x}.permute{tuple(perm)}", f"{x}.transpose({i}, {j})", f"{x}.movedim(0, -1)"]
            if nd == 2:
                opts += [f"{x}.t()", f"{x}.T"]
            k = r.randrange(nd - 1)
            merged = sh[:k] + (sh[k] * sh[k + 1],) + sh[k + 2:]
            opts += [f"{x}.reshape{merged}", f"{x}.flatten({k}, {k + 1})", f"{x}.view{merged}"]
        if nd >= 1:
            opts += [f"{x}.reshape(-1)", f"{x}.unsqueeze({r.randint(-nd - 1, nd)})"]
            k = r.randrange(nd)
            s = sh[k]
            facs = [f for f in range(2, s) if s % f == 0]
            if facs:
                f = r.choice(facs)
                opts += [f"{x}.reshape{sh[:k] + (f, s // f) + sh[k + 1:]}", f"{x}.unflatten({k}, ({f}, {s // f}))"]
            if s >= 3:
                lo = r.randint(0, s // 2)
                hi = r.randint(lo + 1, s)
                step = r.choice([1, 1, 2])
                idx = ", ".join([":"] * k + [f"{lo}:{hi}" + (f":{step}" if step != 1 else "")])
                opts += [f"{x}[{idx}]", f"{x}.narrow({k}, {lo}, {hi - lo})"]
                if lo > 0:
                    opts.append(f"{x}[{', '.join([':'] * k + [f'-{lo}:'])}]")
            if nd >= 2 and s > 0:
                sel = ", ".join([":"] * k + [str(r.randrange(s) - (s if r.random() < 0.3 else 0))])
                opts.append(f"{x}[{sel}]")
            ones = [k for k in range(nd) if sh[k] == 1]
            if ones:
                k1 = r.choice(ones)
                new = list(sh)
                new[k1] = r.randint(2, 12)
                opts += [f"{x}.squeeze({k1})", f"{x}.expand{tuple(new)}", f"{x}.squeeze()"]
            if a.t.numel() * 4 <= MAX_NUMEL:
                opts.append(f"{x}.expand({r.randint(2, 4)}, *{sh})" if nd else f"{x}.expand(3)")
            opts += [f"{x}.contiguous()", f"{x}.unsqueeze(-1).expand(*{sh}, {r.randint(2, 4)})"]
            if nd == 2:
                opts.append(f"{x}.diagonal()")
        else:
            opts += [f"{x}.reshape(1, 1)", f"{x}.unsqueeze(0)", f"{x}.expand(5)"]
        self.emit(r.choice(opts), [a], SELECT)

    def move_misc(self) -> None:
        r = self.rng
        a = self.pick(lambda v: v.ndim >= 1)
        if a is None:
            return
        x, nd = a.name, a.ndim
        d = r.randrange(nd)
        style = r.randrange(11)
        if style == 0:    # cat with a partner of matching shape outside d
            def fits(v: Val) -> bool:
                return v.ndim == nd and all(v.shape[k] == a.shape[k] for k in range(nd) if k != d)
            b = self.pick(fits)
            if b is not None:
                self.emit(f"torch.cat([{x}, {b.name}], {d})", [a, b], SELECT)
        elif style == 1:
            pad = (r.randint(0, 2), r.randint(1, 3))
            self.emit(f"F.pad({x}, {pad}, value={_float_lit(r.choice([0.0, 1.5])) if a.is_float else 0})", [a], SELECT)
        elif style == 2:
            self.emit(f"torch.flip({x}, [{d}])", [a], SELECT)
        elif style == 3:
            n = a.shape[d]
            self.emit(f"{x}.index_select({d}, torch.arange({n} - 1, -1, -2, device={x}.device))", [a], SELECT)
        elif style == 4:
            b = self.pick(lambda v: v.shape == a.shape)
            if b is not None:
                self.emit(f"torch.stack([{x}, {b.name}], {d})", [a, b], SELECT)
        elif style == 5:
            self.emit(f"torch.cumsum({x}, {d})", [a], REDUCE if a.is_float else SELECT)
        elif style == 7 and not a.is_bool:   # a scatter: rows added at repeated indices, or stored at distinct ones
            n = a.shape[d]
            u = r.random()
            if u < 0.5:
                self.emit(f"{x}.index_add({d}, (torch.arange({n}, device={x}.device) * 3) % {max(n // 2, 1)}, {x})",
                          [a], REDUCE if a.is_float else SELECT)
            elif u < 0.65:   # (x * 2: a computed tensor, where the store is a generated kernel; into an input it is ATen's)
                self.emit(f"({x} * 2).index_copy({d}, torch.arange({n} - 1, -1, -1, device={x}.device), {x})",
                          [a], SELECT)
            else:            # through an expanded (stride-0) index: each line along d reversed, or folded onto half
                line = tuple(n if k == d else 1 for k in range(nd))
                if u < 0.8:
                    self.emit(f"({x} * 2).scatter({d}, torch.arange({n} - 1, -1, -1, device={x}.device)"
                              f".reshape({line}).expand({tuple(a.shape)}), {x})", [a], SELECT)
                else:
                    how = r.choice(["amax", "amin", "mean"])
                    self.emit(f"{x}.scatter_reduce({d}, (torch.arange({n}, device={x}.device) * 3 % {max(n // 2, 1)})"
                              f".reshape({line}).expand({tuple(a.shape)}), {x} * 2, {how!r}, "
                              f"include_self={r.random() < 0.5})", [a], REDUCE if how == "mean" else SELECT)
        elif style == 6 and nd == 2 and a.is_float and not a.noisy:
            self.emit(f"{x} @ {x}.t()", [a], REDUCE)
        elif style == 8 and not a.is_bool:    # ATen fallbacks with two outputs
            k = max(1, min(3, a.shape[d]))
            self.emit(r.choice([f"torch.sort({x}, {d})[0]", f"torch.topk({x}, {k}, {d}).values",
                                f"torch.cummax({x}, {d}).values"]), [a], SELECT)
        elif style == 9 and not a.is_bool and not a.noisy:
            self.emit(f"torch.sort({x}, {d}, stable=True)[1]", [a], COMPARE)
        elif style == 10 and a.ndim >= 1:     # an empty slice, and a reduction of it
            e = self.emit(f"{x}.narrow({d}, 0, 0)", [a], SELECT)
            if e is not None and not a.is_bool:
                self.emit(f"{e.name}.sum({d}, keepdim={r.random() < 0.5})", [e], SELECT)
        else:
            self.emit(f"{x}.chunk(2, {d})[{r.randint(0, 1)}]", [a], SELECT)

    # ---- whole program ------------------------------------------------------------------------
    def build(self) -> None:
        r = self.rng
        self.make_inputs()
        moves = [
            (self.move_unary_float, 16), (self.move_unary_int, 5), (self.move_unary_bool, 2),
            (self.move_binary, 20), (self.move_compare_where, 7), (self.move_cast, 5),
            (self.move_reduction, 20), (self.move_composite, 5), (self.move_view, 14), (self.move_misc, 3),
        ]
        target = r.randint(3, 14)
        tries = 0
        while self.counter < target and tries < 300:
            tries += 1
            move = r.choices([m for m, _ in moves], [w for _, w in moves])[0]
            move()
        if self.counter == 0:
            self.emit(f"{self.inputs[0].name} * 2", [self.inputs[0]], ARITH)
        produced = [v for v in self.vals if not v.is_input]
        last = produced[-1]
        sinks = [v for v in produced if v.uses == 0 and v is not last]
        others = [v for v in produced if v is not last]
        outs = [last]
        for _ in range(r.choices([0, 1, 2], [5, 3, 2])[0]):
            pool = [v for v in (sinks if sinks and r.random() < 0.7 else others) if v not in outs]
            if pool:
                outs.append(r.choice(pool))
        if r.random() < 0.05:   # an input, or a view of one, returned as it is
            a = r.choice(self.inputs)
            v = self.emit(r.choice([f"{a.name}", f"{a.name}.unsqueeze(0)", f"{a.name}.reshape(-1)"]), [a], SELECT)
            if v is not None:
                outs.append(v)
        r.shuffle(outs)
        self.outputs = [v.name for v in outs]
        if r.random() < 0.05:
            self.outputs.append(self.outputs[0])   # the same value returned twice

    def function_source(self) -> str:
        params = ", ".join(v.name for v in self.inputs)
        body = [f"    {name} = {expr}" for name, expr, _, _ in self.lines]
        ret = ", ".join(self.outputs)
        if len(self.outputs) > 1 or self.rng.random() < 0.3:
            ret += "," if len(self.outputs) == 1 else ""
        body.append(f"    return {ret}")
        return f"def program({params}):\n" + "\n".join(body) + "\n"

    def source(self, fn_src: str, check: str = "compile_and_compare") -> str:
        """The replayable script; `check` is the comparison it ends with (compile_and_compare, or
        tests/randgraph_train.py's compare_training)."""
        imports = (["from tests.helpers import rand", f"from tests.randgraph_train import {check}"]
                   if check == "compare_training" else [f"from tests.helpers import rand, {check}"])
        head = [f"# autofuse random graph: seed {self.seed}, draft {self.attempt}",
                "import torch",
                "import torch.nn.functional as F",
                *imports,
                "",
                'DEVICE = "cpu"',
                f"gen = torch.Generator().manual_seed({self.torch_seed})"]
        tail = ["", f"args = [{', '.join(v.name for v in self.inputs)}]", f"{check}(program, args)"]
        return "\n".join(head + self.input_src + [""] + [fn_src.rstrip("\n")] + tail) + "\n"

    # ---- conditioning -----------------------------------------------------------------------
    def well_conditioned(self) -> bool:
        """Do all outputs stay put when every error-introducing statement is perturbed a little?"""
        clean = [self.ns[o] for o in self.outputs]
        for trial in range(2):
            g = torch.Generator().manual_seed(self.torch_seed * 7 + trial)
            ns = {"torch": torch, "F": torch.nn.functional}
            for v in self.inputs:
                ns[v.name] = self.ns[v.name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name, expr, mode, pin in self.lines:
                    local = dict(ns)
                    for o in pin:
                        local[o] = _perturb(ns[o], "f32", g)
                    ns[name] = _perturb(eval(expr, local), mode, g)
            for o, c in zip(self.outputs, clean):
                p = ns[o]
                if p.shape != c.shape or p.dtype != c.dtype:
                    return False
                if not c.is_floating_point():
                    if not torch.equal(p, c):
                        return False
                    continue
                rtol, atol = TOLERANCES[c.dtype]
                if not torch.allclose(p.double(), c.double(), rtol=rtol / 2, atol=atol / 2, equal_nan=True):
                    return False
        return True

    def program(self, g: torch.Generator | None = None) -> Callable[..., tuple[Any, ...]]:
        """The draft as a callable over its inputs; with g, every error-introducing statement is
        perturbed as in well_conditioned and every gradient flowing into a statement's result too."""
        names = [v.name for v in self.inputs]

        def run(*inputs: Any) -> tuple[Any, ...]:
            ns: dict[str, Any] = {"torch": torch, "F": torch.nn.functional, **dict(zip(names, inputs))}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name, expr, mode, pin in self.lines:
                    local = dict(ns)
                    if g is not None:
                        for o in pin:
                            local[o] = _perturb(ns[o], "f32", g)
                    out = eval(expr, local)
                    if g is not None:
                        out = _perturb(out, mode, g)
                        if out.requires_grad:
                            out.register_hook(lambda grad: _perturb_grad(grad, g))
                    ns[name] = out
            return tuple(ns[o] for o in self.outputs)
        return run

    def trains_well(self) -> bool:
        """Does a backward run (a float32/float64 input reaches a computed float output), and do the
        gradients stay put when the forward statements and the backward's gradients are perturbed?"""
        args = [self.ns[v.name] for v in self.inputs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                clean = training_step(self.program(), args)
            except RuntimeError:   # an op eager cannot differentiate
                return False
            if not clean.computes_gradient:
                return False
            for trial in range(2):
                g = torch.Generator().manual_seed(self.torch_seed * 7 + 3 + trial)
                if not grads_agree(training_step(self.program(g), args), clean, scale=0.5):
                    return False
        return True


def _perturb(t: torch.Tensor, mode: str | None, g: torch.Generator) -> torch.Tensor:
    if mode is None or not t.is_floating_point():
        return t
    noise = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
    x = t.double()
    if mode == "lowp":
        ulp = 2.0 ** -10 if t.dtype == torch.float16 else 2.0 ** -7
        y = x * (1 + ulp * noise)
    else:
        eps = 2.0 ** -23
        y = x * (1 + 8 * eps * noise)
        if mode == "f32red" and x.numel():
            noise2 = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
            y = y + 8 * eps * float(x.abs().max()) * noise2
    return torch.empty_like(t).copy_(y)


def _perturb_grad(grad: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """A gradient moved by a few ulps of its own dtype (what a backward kernel's rounding may do)."""
    if grad.dtype != torch.float64:
        return _perturb(grad, "lowp" if grad.dtype in LOWP else "f32", g)
    noise = torch.rand(grad.shape, generator=g, dtype=torch.float64) * 2 - 1
    return grad * (1 + 8 * 2.0 ** -52 * noise)


def make_case(seed: int, device: str = "cpu", max_drafts: int = 25,
              nonfinite: float = 0.1) -> tuple[Callable[..., Any], list[Any], str]:
    """(program, args, source) for seed: a well-conditioned random program and its inputs on device.
    `nonfinite` is the chance that a draft mixes NaN / +-inf into its float inputs; the random stream
    is the same for every value, so only that choice changes."""
    rng = random.Random(seed)
    b = None
    for attempt in range(max_drafts):
        b = Builder(seed, rng, attempt, nonfinite)
        b.build()
        if b.well_conditioned():
            break
    assert b is not None
    return _realize(b, device, "compile_and_compare")


def make_training_case(seed: int, device: str = "cpu", max_drafts: int = 25,
                       nonfinite: float = 0.1) -> tuple[Callable[..., Any], list[Any], str] | None:
    """(program, args, source) for seed: a random program to train through (Builder.trains_well),
    or None when no draft of the seed's stream qualifies. The drafts are make_case's; this takes the
    first that also trains well, so it may be a later one than make_case(seed)'s."""
    rng = random.Random(seed)
    for attempt in range(max_drafts):
        b = Builder(seed, rng, attempt, nonfinite)
        b.build()
        if b.well_conditioned() and b.trains_well():
            return _realize(b, device, "compare_training")
    return None


def _realize(b: Builder, device: str, check: str) -> tuple[Callable[..., Any], list[Any], str]:
    """Run the draft's replayable source (without its final check) for its program and inputs."""
    src = b.source(b.function_source(), check)
    src = src.replace('DEVICE = "cpu"', f"DEVICE = {device!r}")  # drawn on the CPU, run on device
    ns: dict[str, Any] = {}
    exec(compile(src.replace(f"\n{check}(program, args)\n", "\n"), f"<randgraph seed {b.seed}>", "exec"), ns)
    return ns["program"], ns["args"], src
