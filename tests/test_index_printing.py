"""Index expressions printed as Triton source (codegen/printer.py): floored division and remainder of
a dividend that may be negative come out equal to sympy's, and no `//` or `%` of the printed text
ever sees a negative dividend (Triton's GPU compiler analyses signed division as if it could not)."""
from __future__ import annotations

import itertools
import random

import pytest
import sympy
import torch

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


def _relative_shift_softmax(scores, bias):
    """Transformer-XL's relative shift (rows of 2L-1 read as rows of L one element later) under a
    softmax: its gathers' bounds are index values that floor sums of row and column variables."""
    b, h, q, k2 = scores.shape
    shifted = torch.nn.functional.pad(scores, (1, 0)).reshape(b, h, k2 + 1, q)[:, :, 1:].reshape(b, h, q, k2)
    return torch.softmax(shifted[..., : (k2 + 1) // 2] + bias, dim=-1)


def _kernel_lines(fn, args) -> list[str]:
    import autofuse
    from autofuse.api import Recorder
    rec = Recorder()
    with torch.no_grad():
        out = autofuse.compile(fn, strict=True, use_db=False, recorder=rec)(*args)
    torch.testing.assert_close(out, fn(*args), rtol=1e-5, atol=1e-6)
    return [line for _, _, art in rec.graphs for k in art.kernels if k.kind != "fallback"
            for line in k.source.split("@triton.jit\ndef triton")[-1].splitlines()]


def test_a_relative_shift_hides_its_mixed_index_values_from_the_gpu_analysis(device):
    """A reduction kernel's index values that floor a sum of xindex and rindex go through
    `_opaque_index` (the GPU's axis analysis mis-derived such a value's comparison); its memory offsets
    do not, and neither do the index values of a plain softmax. On the suite's device: a CUDA run
    checks the GPU's values too."""
    torch._dynamo.reset()
    scores, bias = torch.randn(2, 3, 12, 23, device=device), torch.randn(12, 12, device=device)
    lines = _kernel_lines(_relative_shift_softmax, (scores, bias))
    hidden = [line for line in lines if "_opaque_index(" in line]
    assert hidden and all("//" in line or "%" in line for line in hidden)
    assert all("xindex" in line and "rindex" in line for line in hidden)
    assert not any("tl.load(" in line for line in hidden)
    torch._dynamo.reset()
    plain = _kernel_lines(lambda x: torch.softmax(x.reshape(6, 12, 23)[:, :, 3:] * 2, -1), (scores,))
    assert plain and not any("_opaque_index(" in line for line in plain)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_the_gpu_opaque_index_compiles_for_sm90(dtype, tmp_path):
    """The GPU prelude's `_opaque_index` (an inline PTX move of a 32- or 64-bit integer) compiles
    for sm_90, the move kept as an inline-assembly op of the kernel's IR."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from autofuse.codegen.prelude import prelude
    from tests.test_precompile import compiling_module
    mod = compiling_module("opaque", prelude(False) + f'''

@triton.jit
def kernel(out_ptr, XBLOCK: tl.constexpr):
    x = tl.arange(0, XBLOCK).to(tl.{dtype})
    tl.store(out_ptr + tl.arange(0, XBLOCK), _opaque_index((x + 5) % 7) < 3)
''', tmp_path / dtype)
    src = ASTSource(mod.kernel, {"out_ptr": "*i1", "XBLOCK": "constexpr"}, constexprs={"XBLOCK": 64})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
    bits = "b64" if dtype == "int64" else "b32"
    assert f'elementwise_inline_asm "mov.{bits} $0, $1;"' in compiled.asm["ttgir"]
