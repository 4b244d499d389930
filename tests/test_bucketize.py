"""bucketize and searchsorted (1-D sorted sequence) as one search inside a generated kernel
(autofuse/lower/bucketize.py), against eager.

Each case compiles through `autofuse.compile(strict=True, poison=True)` and asserts that no ATen
fallback ran and that a generated kernel holds the bucketize. Values include the boundaries
themselves, values below the first and above the last, and NaN and ±inf for floats; boundaries are
sorted with repeated values.
"""
from __future__ import annotations

import math
import re

import pytest
import torch

import autofuse
from autofuse.api import Recorder
from tests.helpers import rand

pytestmark = [pytest.mark.filterwarnings("ignore:autofuse. running Triton kernels"),
              pytest.mark.filterwarnings("ignore:torch.searchsorted.. .* is non-contiguous"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in sin")]

F32, F16, BF16, I32, I64 = torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64
LENGTHS = [1, 2, 7, 63, 64, 100]


def boundaries(n: int, dtype: torch.dtype, device: str, seed: int = 0) -> torch.Tensor:
    """n sorted values in [-4, 4], with repeats (drawn from a grid of 41 points)."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.randint(-20, 21, (n,), generator=g).sort().values
    b = grid if dtype == I64 else grid.to(F32) / 5
    return b.to(dtype).to(device)


def values(b: torch.Tensor, rows: int, cols: int, device: str) -> torch.Tensor:
    """A transposed [rows, cols] view: every boundary, below the first and above the last, the
    floats' NaN and ±inf, then random values (never zeros only) in [-5, 5]."""
    dtype = b.dtype
    special = [b.cpu(), torch.tensor([b.min() - 1, b.max() + 1]).to(dtype)]
    if dtype.is_floating_point:
        special.append(torch.tensor([math.nan, math.inf, -math.inf, b[0] + 0.1, b[-1] - 0.1]).to(dtype))
    head = torch.cat(special)
    assert head.numel() < rows * cols
    rest = rand((rows * cols - head.numel(),), dtype, "cpu", low=-5, high=5,
                gen=torch.Generator().manual_seed(1))
    flat = torch.cat([head, rest])
    return flat.view(cols, rows).to(device).t()


def run(fn, *args, kernels: int | None = None) -> list:
    """fn compiled strictly with poisoned buffers, compared with eager (exact: the outputs are
    indices); returns the generated kernels. Fails on an ATen fallback or a bucketize not inside a
    generated kernel."""
    torch._dynamo.reset()
    rec = Recorder()
    compiled = autofuse.compile(fn, strict=True, poison=True, use_db=False, recorder=rec)
    actual, expected = compiled(*args), fn(*args)
    if not isinstance(expected, (list, tuple)):
        actual, expected = [actual], [expected]
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.stride() == e.stride(), (a.dtype, e.dtype, a.stride(), e.stride())
        torch.testing.assert_close(a, e, rtol=0, atol=0)
    assert rec.outcomes and all(o.compiled for o in rec.outcomes), rec.outcomes
    ks = [k for _, _, art in rec.graphs for k in art.kernels]
    fallbacks = [k.aten_ops for k in ks if k.kind == "fallback"]
    assert not fallbacks, f"ran as ATen fallbacks: {fallbacks}"
    searched = [k for k in ks if {"bucketize", "searchsorted"} & set(k.aten_ops)]
    assert searched, [k.aten_ops for k in ks]
    if kernels is not None:
        assert len(ks) == kernels, [k.aten_ops for k in ks]
    return searched


def all_modes(v: torch.Tensor, b: torch.Tensor) -> tuple:
    return tuple(torch.bucketize(v, b, right=right, out_int32=out_int32)
                 for right in (False, True) for out_int32 in (False, True))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [F32, F16, BF16, I64])
def test_bucketize_matches_eager(device, dtype, n):
    """right=False/True and out_int32=False/True on a transposed 13 x 29 view."""
    b = boundaries(n, dtype, device)
    run(all_modes, values(b, 13, 29, device), b)


@pytest.mark.parametrize("n", [7, 64])
def test_search_is_one_gather_per_step_in_int32(device, n):
    """ceil(log2(n + 1)) boundary reads (the first at a constant index), int32 index arithmetic
    without a wrap of negative indices, one cast of the answer to int64."""
    b = boundaries(n, F32, device)
    (k,) = run(lambda v, bb: torch.bucketize(v, bb), values(b, 5, 27, device), b, kernels=1)
    body = k.source[k.source.index(f"def {k.fn_name}"):]
    reads = re.findall(r"tl\.load\(in_ptr1 ", body)
    assert len(reads) == math.ceil(math.log2(n + 1)), body
    assert body.count("tl.int64") == 1 and "< 0" not in body, body


def test_bucketize_fuses_with_producer_and_consumer(device):
    b = boundaries(63, F32, device)
    x = values(b, 17, 9, device)
    (k,) = run(lambda v, bb: torch.bucketize(v.sin() * 4, bb).float() * 2, x, b, kernels=1)
    assert {"sin", "bucketize", "mul"} <= set(k.aten_ops), k.aten_ops


def test_boundaries_computed_in_the_program(device):
    """linspace boundaries (the corpus program bucketize_rows_f32): stored once, then searched."""
    def f(v):
        return torch.bucketize(v, torch.linspace(-3.0, 3.0, 63, device=v.device))
    run(f, rand((19, 131), F32, device, noncontig=True), kernels=2)


@pytest.mark.parametrize("vdt, bdt", [(F16, F32), (I64, F32), (F16, I64), (I32, I64), (F32, BF16)])
def test_mixed_dtypes_compare_in_the_promoted_dtype(device, vdt, bdt):
    """Both sides cast to torch's promoted dtype first: int64 boundaries past 2048 round to float16
    beside float16 values, so equal-looking values fall on the other side of some."""
    b = boundaries(100, bdt, device) * (129 if bdt == I64 else 517)
    v = torch.cat([b.to(vdt), rand((131,), F32, device, low=-2600, high=2600).to(vdt)]).view(7, 33)
    run(all_modes, v, b)


def test_boundaries_view_and_empty(device):
    """A strided view of boundaries, and no boundaries at all (every bucket is 0)."""
    b = boundaries(14, F32, device)
    v = values(b, 6, 11, device)
    run(lambda x, bb: all_modes(x, bb[::2]), v, b)
    run(lambda x, bb: all_modes(x, bb[:0]), v, b)


@pytest.mark.parametrize("side", [None, "left", "right"])
def test_searchsorted_with_a_1d_sequence(device, side):
    seq = boundaries(50, F32, device)
    v = values(seq, 9, 12, device)
    run(lambda s, x: (torch.searchsorted(s, x, side=side), torch.searchsorted(s, x, side=side, out_int32=True),
                      torch.searchsorted(s, x, right=side == "right")), seq, v)


@pytest.mark.parametrize("n", [1, 7, 50, 64])
@pytest.mark.parametrize("dtype", [F32, I64])
def test_searchsorted_with_a_sorter(device, dtype, n):
    """An unsorted sequence and the permutation that sorts it (a stable argsort, so repeated values
    keep an order): every side and output dtype; a sorter computed in the program is stored first."""
    seq = boundaries(n, dtype, device)[torch.randperm(n, generator=torch.Generator().manual_seed(n))]
    v = values(seq.sort().values, 9, 12, device)
    order = torch.argsort(seq, stable=True)
    run(lambda s, x, o: tuple(torch.searchsorted(s, x, side=side, sorter=o, out_int32=i32)
                              for side in ("left", "right") for i32 in (False, True)), seq, v, order)
    run(lambda s, x: torch.searchsorted(s, x, sorter=torch.argsort(s, stable=True)), seq, v)
