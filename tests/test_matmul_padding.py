"""Matrix products with unaligned K / N: operands padded to 16-byte rows, the result a view of the
first N columns, returned as that view, as torch.compile returns it (lower/matmul.py). On the CPU
the padding is forced through the heuristics."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from autofuse.lower.matmul import aligned_extent
from autofuse.schedule.heuristics import Heuristics

from .helpers import assert_close, kernels_of, rand

PAD = Heuristics(pad_matmul_devices=("cpu", "cuda"), pad_matmul_min_macs=0, pad_matmul_min_rows=1,
                 pad_matmul_f32_without_tf32=True)


def _check(fn, args, heuristics=PAD):
    """Equal to eager; a returned product keeps eager's strides or has rows padded to 16 bytes."""
    options = CompileOptions(poison=True, strict=True, use_db=False, heuristics=heuristics)
    compiled = compile_traced(fn, args, options)
    expected = fn(*args)
    actual = compiled(*args)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    assert_close(list(actual), expected, atol=1e-4, rtol=1e-4, check_stride=False)
    for a, e in zip(actual, expected):
        if a.dim() >= 2 and a.stride() != e.stride():
            padded = aligned_extent(a.shape[-1], a.dtype)
            assert a.stride()[-1] == 1 and a.stride()[-2] == padded, (a.stride(), e.stride())
    return kernels_of(compiled)


def _externs(kernels) -> list:
    return [k for k in kernels if k.kind == "fallback"]


@pytest.mark.parametrize("m,k,n", [(37, 13, 50), (64, 24, 21), (5, 33, 7)])
def test_mm_unaligned_dims_padded(m, k, n):
    a, b = rand((m, k)), rand((k, n))
    kernels = _check(lambda a, b: torch.mm(a, b), (a, b))
    assert len(_externs(kernels)) == 1
    # a padding copy per unaligned operand (f32: rows of 4 elements); the padded result is returned
    # as its view, no copy
    assert len(kernels) - 1 == (k % 4 != 0) + (k % 4 != 0 or n % 4 != 0)


def test_weight_transposed_as_in_a_linear_layer():
    """GPT-2's output projection: x @ w.t() with an odd vocabulary; the weight copy keeps w's order."""
    x, w = rand((6, 10, 24)), rand((53, 24))
    kernels = _check(lambda x, w: torch.nn.functional.linear(x, w) * 2.0, (x, w))
    assert _externs(kernels)


def test_a_returned_linear_layer_output_is_the_view_of_its_padded_product():
    """GPT-2's logits: the 3-D view of a padded product is returned with the padded row stride, as
    torch.compile returns it; no kernel copies it into eager's strides."""
    x, w = rand((6, 10, 24)), rand((53, 24))
    options = CompileOptions(poison=True, strict=True, use_db=False, heuristics=PAD)
    compiled = compile_traced(lambda x, w: torch.nn.functional.linear(x, w), (x, w), options)
    (out,) = compiled(x, w)
    assert out.stride() == (560, 56, 1)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, w), rtol=1e-4, atol=1e-4)
    kinds = [k.kind for k in kernels_of(compiled)]
    assert kinds == ["pointwise", "fallback"], kinds   # the weight's padding copy, the product


def test_a_padded_product_read_by_another_is_not_copied():
    """A padded product's result (zeros in its padding: the weight's padding columns are zeros) is
    the padded first operand of the next product as it is: no padding copy of it."""
    a, w1, w2 = rand((37, 13)), rand((13, 21)), rand((21, 8))
    kernels = _check(lambda a, w1, w2: (a @ w1) @ w2, (a, w1, w2))
    # copies of a (K 13 -> 16), w1 (13 x 21 -> 16 x 24) and w2 (21 -> 24 rows); two products
    assert sorted(k.kind for k in kernels) == ["fallback"] * 2 + ["pointwise"] * 3, \
        [(k.kind, k.aten_ops) for k in kernels]


def test_addmm_bias_padded_along_n():
    bias, a, b = rand((21,)), rand((30, 12)), rand((12, 21))
    _check(lambda bias, a, b: torch.addmm(bias, a, b), (bias, a, b))
    _check(lambda bias, a, b: torch.addmm(bias, a, b, beta=0.5, alpha=2.0), (bias, a, b))
    full = rand((30, 21))
    _check(lambda bias, a, b: torch.addmm(bias, a, b).relu(), (full, a, b))


def test_bmm_and_noncontiguous_operands():
    a, b = rand((3, 17, 9), noncontig=True), rand((3, 9, 11))
    _check(lambda a, b: torch.bmm(a, b), (a, b))
    _check(lambda a, b: torch.bmm(a, b).sum(-1), (a, b))


def test_output_read_by_a_kernel_and_returned():
    """The padded result feeds a pointwise kernel and is also a graph output (the padded view)."""
    a, b = rand((19, 6)), rand((6, 13))
    _check(lambda a, b: (lambda y: (y, y.softmax(-1)))(torch.mm(a, b)), (a, b))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types(dtype):
    a, b = rand((33, 20), dtype), rand((20, 45), dtype)
    options = CompileOptions(poison=True, strict=True, use_db=False, heuristics=PAD)
    compiled = compile_traced(lambda a, b: torch.mm(a, b), (a, b), options)
    (out,) = compiled(a, b)
    assert out.stride() == (48, 1)   # 45 columns padded to 16 bytes of 2-byte elements
    torch.testing.assert_close(out.float(), torch.mm(a.float(), b.float()), rtol=2e-2, atol=2e-1)


def test_default_heuristics_pad_only_large_cuda_products():
    h = Heuristics()
    assert not h.pad_matmul(torch.device("cpu"), torch.float32, 4096, 1001, 4096)
    assert h.pad_matmul(torch.device("cuda"), torch.bfloat16, 2048, 1024, 50257)
    assert not h.pad_matmul(torch.device("cuda"), torch.bfloat16, 2048, 1024, 50264)  # aligned
    assert not h.pad_matmul(torch.device("cuda"), torch.bfloat16, 8, 1024, 50257)     # few rows
    assert not h.pad_matmul(torch.device("cuda"), torch.int32, 2048, 1001, 4096)


def test_f32_products_pad_only_when_tf32_is_allowed():
    """Without TF32, cuBLAS runs f32 products on CUDA cores: alignment gains nothing there, and the
    padding copy only costs (docs/defaults.md, "Matrix products")."""
    h = Heuristics()
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert not h.pad_matmul(torch.device("cuda"), torch.float32, 2048, 1024, 50257)
        assert h.pad_matmul(torch.device("cuda"), torch.bfloat16, 2048, 1024, 50257)
        torch.backends.cuda.matmul.allow_tf32 = True
        assert h.pad_matmul(torch.device("cuda"), torch.float32, 2048, 1024, 50257)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_aligned_product_is_the_plain_extern_call():
    a, b = rand((16, 8)), rand((8, 12))
    kernels = _check(lambda a, b: torch.mm(a, b), (a, b))
    assert len(kernels) == 1 and kernels[0].kind == "fallback"


def test_transposed_view_of_a_lazy_value_reaches_the_product_as_a_view():
    """`mm(y.t(), w)` with y lazy (and read elsewhere): y is written once in its own layout and the
    product reads its transpose as a strided view; no kernel stores a transposed copy."""
    from .helpers import compile_and_compare
    x, w = rand((37, 20)), rand((37, 12))

    def f(x, w):
        y = (x * 2).sigmoid()
        return torch.mm(y.t(), w), y + 1

    kernels = kernels_of(compile_and_compare(f, (x, w)))
    pointwise = [k for k in kernels if k.kind == "pointwise"]
    assert len(pointwise) == 1 and len(_externs(kernels)) == 1
    stores = [line for line in pointwise[0].source.splitlines() if "tl.store" in line]
    assert stores and all("(xindex)" in line for line in stores)
