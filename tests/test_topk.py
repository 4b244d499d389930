"""topk of a few largest elements of short rows, lowered as rounds of reductions (lower/reductions.py):
values equal to eager's in eager's order, positions that hold them (equal values may come in another
order than eager's, which does not fix it), NaN larger than every number; the k smallest and more
than the rounds take as the first k of the rows sorted; longer rows and 64-bit values stay ATen's."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from autofuse.lower.reductions import TOPK_MAX_K, TOPK_MAX_ROW
from tests.helpers import assert_close, kernels_of, rand

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)


def check_topk(x: torch.Tensor, k: int, dim: int = -1):
    """Compiled topk against eager: values equal, each position distinct and holding its value;
    the kernels, for the caller to inspect."""
    fn = lambda t: tuple(torch.topk(t, k, dim=dim))   # noqa: E731
    compiled = compile_traced(fn, [x], OPTIONS)
    values, positions = compiled(x)
    want, _ = fn(x)
    assert_close(values, want)
    assert positions.dtype == torch.int64 and positions.shape == want.shape
    assert_close(torch.gather(x, dim, positions), values)
    if k > 1:   # distinct positions
        assert bool((positions.sort(dim).values.diff(dim=dim) > 0).all())
    return kernels_of(compiled)


def _router(logits):
    """Mixtral's router: softmax over the experts, the 2 largest, normalized."""
    w = logits.softmax(-1, dtype=torch.float32)
    w, picked = torch.topk(w, 2, dim=-1)
    return (w / w.sum(-1, keepdim=True)).to(logits.dtype), picked


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_mixture_of_experts_router_needs_no_aten_call(device, dtype):
    """The softmax and the topk's rounds share one kernel; the routing weights equal eager's and the
    chosen experts hold the largest probabilities (bf16 logits can tie)."""
    logits = rand((37, 8), dtype, device)
    compiled = compile_traced(_router, [logits], OPTIONS)
    (weights, picked), (want, _) = compiled(logits), _router(logits)
    assert_close(weights, want)
    probs = logits.softmax(-1, dtype=torch.float32)
    assert_close(torch.gather(probs, -1, picked), torch.topk(probs, 2, dim=-1).values)
    kernels = kernels_of(compiled)
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]
    assert sum(k.kind == "reduction" for k in kernels) == 1


@pytest.mark.parametrize("shape,k,dim", [((5, 100), 3, -1), ((50, 7), 4, 0), ((3, 50, 7), 2, 1),
                                         ((4, 8), 8, -1), ((6, TOPK_MAX_ROW), TOPK_MAX_K, 1)])
def test_topk_over_any_dim(device, shape, k, dim):
    kernels = check_topk(rand(shape, device=device, noncontig=len(shape) == 2), k, dim)
    assert all(k.kind != "fallback" for k in kernels)


def test_topk_with_ties_nan_and_infinities(device):
    """Integers with many ties; NaN first (the largest), +inf next, a row of -inf."""
    ints = torch.randint(-3, 3, (9, 20), dtype=torch.int32).to(device)
    check_topk(ints, 5)
    x = rand((6, 10), device=device)
    x[1, 3] = float("nan")
    x[2, :] = float("-inf")
    x[3, 2] = float("inf")
    x[4, [1, 5]] = float("nan")
    kernels = check_topk(x, 3)
    assert all(k.kind != "fallback" for k in kernels)


@pytest.mark.parametrize("case", ["smallest", "k-beyond-rounds"])
def test_topk_beyond_the_rounds_is_the_first_of_the_rows_sorted(device, case):
    """The k smallest (NaN never among them while numbers remain), or more than the rounds take:
    the rows sorted in one block each (lower/sort.py), the first k of each."""
    x = (torch.randperm(4 * 30).reshape(4, 30).float() / 7 - 3).to(device)   # distinct: positions unique
    x[1, 4] = float("nan")
    k = TOPK_MAX_K + 2 if case == "k-beyond-rounds" else 2
    largest = case != "smallest"
    fn = lambda t: tuple(torch.topk(t * 2, k, dim=-1, largest=largest))   # noqa: E731
    compiled = compile_traced(fn, [x], OPTIONS)
    (values, positions), (want_values, want_positions) = compiled(x), fn(x)
    assert torch.allclose(values, want_values, equal_nan=True) and torch.equal(positions, want_positions)
    assert all(kk.kind != "fallback" for kk in kernels_of(compiled))


def test_topk_beyond_a_block_stays_atens(device):
    x, largest = rand((4, 2 * TOPK_MAX_ROW), device=device), False
    fn = lambda t: tuple(torch.topk(t, 2, dim=-1, largest=largest))   # noqa: E731
    compiled = compile_traced(fn, [x], OPTIONS)
    assert_close(compiled(x)[0], fn(x)[0])
    assert any(kk.kind == "fallback" and "topk" in kk.aten_ops for kk in kernels_of(compiled))


@pytest.mark.parametrize("seed", range(12))
def test_topk_fuzz(device, seed):
    """Random rank, dim, row length, k, dtype and layout, values with ties drawn from a few levels."""
    g = torch.Generator().manual_seed(seed)
    ndim = int(torch.randint(1, 4, (1,), generator=g))
    shape = [int(s) for s in torch.randint(1, 9, (ndim,), generator=g)]
    dim = int(torch.randint(0, ndim, (1,), generator=g))
    shape[dim] = int(torch.randint(2, 300, (1,), generator=g))
    k = int(torch.randint(1, min(TOPK_MAX_K, shape[dim]) + 1, (1,), generator=g))
    dtype = [torch.float32, torch.bfloat16, torch.int64][seed % 3]
    x = torch.randint(-4, 5, shape, generator=g).to(dtype) if seed % 2 else rand(shape, dtype)
    kernels = check_topk(x.to(device), k, dim)
    assert all(kk.kind != "fallback" for kk in kernels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_values_read_by_a_math_function(device, dtype):
    """topk's values reach their readers in f32, as every half-precision value does (libdevice's
    exp takes no f16)."""
    x = rand((1, 15), dtype, device=device)
    fn = lambda t: torch.sigmoid(torch.topk(t, 1, 0).values) * t   # noqa: E731
    compiled = compile_traced(fn, [x], OPTIONS)
    assert_close(compiled(x)[0], fn(x))
