"""histc over a given range into few bins, lowered as a count per bin (lower/reductions.py): equal
to eager's counts for floats (values on the edges, outside the range, NaN) and for the integer ids
a mixture of experts counts on the GPU; the data's own range and too many bins x elements stay ATen's."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from autofuse.lower.reductions import HISTC_MAX_WORK
from tests.helpers import assert_close, kernels_of, rand

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)


def compiled_kernels(fn, args, want):
    compiled = compile_traced(fn, args, OPTIONS)
    assert_close(compiled(*args)[0], want)
    return kernels_of(compiled)


CASES = {
    "expert-ids": (lambda e: torch.histc(e, bins=8, min=0, max=7).cumsum(0),
                   lambda d: [torch.randint(0, 8, (4096,)).float().to(d)]),
    "range": (lambda x: torch.histc(x, bins=13, min=-2, max=2.5), lambda d: [rand((37, 11), device=d)]),
    "edges": (lambda x: torch.histc(x * 1, bins=8, min=0, max=7),
              lambda d: [torch.tensor([0., 1, 2, 3, 7, 7, 8, -1, 3.5, float("nan"), 6.999, 7.0001], device=d)]),
    "transposed": (lambda x: torch.histc(x, bins=5, min=-1, max=1),
                   lambda d: [rand((9, 31), device=d, noncontig=True)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_histc_counts_equal_eager(device, case):
    fn, make = CASES[case]
    args = make(device)
    kernels = compiled_kernels(fn, args, fn(*args))
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]


@pytest.mark.parametrize("bins,lo,hi", [(8, 0, 7), (5, 0, 9), (3, 1, 4)])
def test_histc_of_integer_ids_counts_in_integers(monkeypatch, bins, lo, hi):
    """CUDA's histc of int32 (the CPU's refuses it: its shape rule is told it runs on the GPU), counted
    against the float histc of the same values: ids outside the range not counted, the last id in
    the last bin."""
    import torch._meta_registrations as meta
    monkeypatch.setattr(meta, "device_hint", lambda t: "cuda")
    ids = torch.randint(-2, 10, (4096,))
    fn = lambda e: torch.histc(e.int(), bins=bins, min=lo, max=hi)   # noqa: E731
    kernels = compiled_kernels(fn, [ids], torch.histc(ids.float(), bins, lo, hi).int())
    assert [k.kind for k in kernels] == ["reduction"]


@pytest.mark.parametrize("case", ["data-range", "too-much-work"])
def test_histc_beyond_a_counting_reduction_stays_atens(device, case):
    x = rand((300,) if case == "data-range" else (HISTC_MAX_WORK // 100 + 1,), device=device)
    fn = (lambda t: torch.histc(t, bins=5)) if case == "data-range" else (lambda t: torch.histc(t, 100, -1, 1))
    kernels = compiled_kernels(fn, [x], fn(x))
    assert any(k.kind == "fallback" and "histc" in k.aten_ops for k in kernels)


@pytest.mark.parametrize("seed", range(12))
def test_histc_fuzz(device, seed):
    """Random bins, range, shape and values (many on bin edges: multiples of the bin width)."""
    g = torch.Generator().manual_seed(seed)
    bins = int(torch.randint(1, 40, (1,), generator=g))
    lo = float(torch.randint(-5, 3, (1,), generator=g))
    hi = lo + float(torch.randint(1, 9, (1,), generator=g))
    n = int(torch.randint(1, 500, (1,), generator=g))
    edges = lo + (hi - lo) / bins * torch.randint(-2, bins + 3, (n,), generator=g).float()
    x = torch.where(torch.rand(n, generator=g) < 0.5, edges, lo - 1 + (hi - lo + 2) * torch.rand(n, generator=g))
    fn = lambda t: torch.histc(t, bins=bins, min=lo, max=hi)   # noqa: E731
    kernels = compiled_kernels(fn, [x.to(device)], fn(x.to(device)))
    assert all(k.kind != "fallback" for k in kernels)
