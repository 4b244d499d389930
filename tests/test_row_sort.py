"""sort of rows of at most SORT_ROW_MAX elements as one generated kernel (lower/sort.py `row_sort`,
codegen/scan.py): each row's block sorted whole, values and positions equal to eager's stable sort
(NaN last ascending and first descending, -0.0 equal to 0.0, infinities), any dim, non-contiguous
and non-power-of-two rows, half, integer and 64-bit dtypes, fused with what precedes and follows
it; longer rows stay ATen's; the search offers a sort only whole-row configs."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from autofuse.codegen.config import next_pow2
from autofuse.lower.sort import SORT_ROW_MAX
from tests.helpers import assert_close, kernels_of, rand, reduction_candidates

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)


def _specials(x: torch.Tensor) -> torch.Tensor:
    """NaN, infinities, signed zeros and ties planted in the first rows (float inputs)."""
    x = x.clone()
    flat = x.view(-1, x.shape[-1]) if x.is_contiguous() else x.reshape(-1, x.shape[-1])
    flat[0, 1] = float("nan")
    flat[0, 4] = float("nan")
    flat[1, :3] = 0.0
    flat[1, 3:6] = -0.0
    flat[2, 0], flat[2, 2] = float("inf"), float("-inf")
    flat[3, :] = flat[3, 0]
    return flat.view(x.shape) if x.is_contiguous() else flat.reshape(x.shape)


def _compiled(fn, args):
    compiled = compile_traced(fn, args, OPTIONS)
    return compiled(*args), kernels_of(compiled)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.uint8])
@pytest.mark.parametrize("descending", [False, True])
def test_rows_sorted_as_eagers_stable_sort(device, dtype, descending):
    if dtype.is_floating_point:
        x = _specials(rand((9, 203), dtype, device=device))
    else:
        x = torch.randint(0, 60, (9, 203), dtype=dtype, device=device)
    fn = lambda x: torch.sort(x + 1, dim=-1, descending=descending, stable=True)   # noqa: E731
    (values, positions), kernels = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert torch.equal(values, want_values) or torch.allclose(values.float(), want_values.float(), equal_nan=True)
    assert torch.equal(positions, want_positions)
    assert [k.kind for k in kernels] == ["scan"]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_any_dim_of_a_non_contiguous_tensor(device, dim):
    x = _specials(rand((6, 21, 13), device=device)).transpose(0, 2)
    fn = lambda x: torch.sort(x.sin(), dim=dim, stable=True)   # noqa: E731
    (values, positions), _ = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert_close(values, want_values)
    assert torch.equal(positions, want_positions)


@pytest.mark.parametrize("n", [1, 2, 64, 1000, SORT_ROW_MAX])
def test_row_lengths(device, n):
    x = rand((5, n), device=device)
    fn = lambda x: torch.sort(x * 2, dim=-1)   # noqa: E731
    (values, positions), kernels = _compiled(fn, [x])
    want_values, _ = fn(x)
    assert_close(values, want_values)
    assert_close(torch.gather(x * 2, -1, positions), values)   # the positions of the values (ties: any)
    assert all(k.kind != "fallback" for k in kernels)


def test_argsort_and_consumers_fused(device):
    """argsort, and the sorted values read by an epilogue, in the sort's kernel."""
    x = rand((17, 300), device=device)
    fn = lambda x: (torch.argsort(x.exp(), dim=-1, descending=True, stable=True),   # noqa: E731
                    torch.sort(x.exp(), dim=-1, stable=True).values.cumsum(-1))
    (positions, running), kernels = _compiled(fn, [x])
    want_positions, want_running = fn(x)
    assert torch.equal(positions, want_positions)
    assert_close(running, want_running)
    assert all(k.kind == "scan" for k in kernels), [k.kind for k in kernels]


def test_rows_longer_than_a_block_stay_atens(device):
    x = rand((3, SORT_ROW_MAX + 1), device=device)
    fn = lambda x: torch.sort(x, dim=-1, stable=True)   # noqa: E731
    (values, positions), kernels = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert torch.equal(values, want_values) and torch.equal(positions, want_positions)
    assert any(k.kind == "fallback" and "sort" in k.aten_ops for k in kernels)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("what", ["both", "values", "positions"])
def test_64_bit_rows_sorted_as_eagers_stable_sort(device, dtype, descending, what):
    """64-bit keys with their positions beside them (ties, the extremes of int64, NaN and signed
    zeros of float64); values alone sort the keys alone."""
    if dtype == torch.int64:
        x = torch.randint(-4, 4, (7, 301), dtype=dtype, device=device) * (2 ** 40)
        x[0, :4] = torch.tensor([2 ** 63 - 1, -2 ** 63, 2 ** 63 - 1, 0])
    else:
        x = _specials(rand((7, 301), dtype, device=device))
        x[4, :3] = torch.tensor([1e300, -1e-300, 1e-310], dtype=dtype)
    fn = {"both": lambda t: tuple(torch.sort(t, dim=-1, descending=descending, stable=True)),
          "values": lambda t: torch.sort(t, dim=-1, descending=descending, stable=True).values - 1,
          "positions": lambda t: torch.argsort(t, dim=-1, descending=descending, stable=True)}[what]
    got, kernels = _compiled(fn, [x])
    want = fn(x)
    for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
        assert torch.equal(g, w) or torch.allclose(g, w, equal_nan=True), (g, w)
    assert [k.kind for k in kernels] == ["scan"], [(k.kind, k.aten_ops) for k in kernels]
    sorts = kernels[0].source.count("_sort_rows_by(tl.where")
    assert sorts == (0 if what == "values" else 1)


def test_the_search_offers_a_sort_only_whole_row_configs():
    x = rand((64, 700))
    candidates = reduction_candidates(lambda x: torch.sort(x, dim=-1).values * 2, [x])
    assert candidates
    assert all(c.persistent and c.split == 1 and c.RBLOCK >= next_pow2(700) for c in candidates)


@pytest.mark.parametrize("seed", range(8))
def test_row_sort_fuzz(device, seed):
    """Random shapes, dims, directions and values drawn from a few (many ties), NaN among them."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(int(s) for s in torch.randint(1, 40, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g))
    dim = int(torch.randint(0, len(shape), (1,), generator=g))
    descending = bool(torch.randint(0, 2, (1,), generator=g))
    x = torch.randint(-3, 4, shape, generator=g).float()
    x[torch.rand(shape, generator=g) < 0.1] = float("nan")
    x = x.to(device)
    fn = lambda x: torch.sort(x, dim=dim, descending=descending, stable=True)   # noqa: E731
    (values, positions), _ = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert torch.allclose(values, want_values, equal_nan=True)
    assert torch.equal(positions, want_positions)


def _ties_free(shape, device):
    """Distinct values (a permutation, scaled): the position of each is unique, as eager's is."""
    return (torch.randperm(int(torch.tensor(shape).prod())).reshape(shape).float() / 7 - 3).to(device)


@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, True), (-1, False)])
def test_median_and_kthvalue_of_rows(device, dim, keepdim):
    x = _ties_free((6, 37, 5), device)
    for fn in (lambda x: torch.median(x * 2, dim=dim, keepdim=keepdim),
               lambda x: torch.kthvalue(x + 1, 3, dim, keepdim=keepdim)):
        (values, positions), kernels = _compiled(fn, [x])
        want_values, want_positions = fn(x)
        assert_close(values, want_values)
        assert torch.equal(positions, want_positions)
        assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]


def test_median_of_rows_holding_nan_is_the_first_nan(device):
    x = _ties_free((4, 20), device)
    x[0, 7] = x[0, 3] = float("nan")
    x[2, 19] = float("nan")
    fn = lambda x: torch.median(x, dim=1)   # noqa: E731
    (values, positions), _ = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert torch.allclose(values, want_values, equal_nan=True)
    assert torch.equal(positions, want_positions)
    kth = lambda x: torch.kthvalue(x, 19, 1)   # noqa: E731   (NaN sorts last: row 0's 19th is a NaN)
    (values, positions), _ = _compiled(kth, [x])
    assert torch.allclose(values, kth(x)[0], equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_median_of_the_whole_tensor(device, dtype):
    x = (_ties_free((5, 9), device) * 7).to(dtype)
    fn = lambda x: torch.median(x.t())   # noqa: E731
    got, kernels = _compiled(fn, [x])
    assert_close(got if isinstance(got, torch.Tensor) else got[0], fn(x))
    assert all(k.kind != "fallback" for k in kernels)


@pytest.mark.parametrize("seed", range(8))
def test_median_kthvalue_and_nanmedian_fuzz(device, seed):
    """Random shapes, dims, k and values drawn from a few (many ties), NaN among them: the values
    equal eager's, and each position holds its value (eager fixes no position among ties)."""
    g = torch.Generator().manual_seed(1000 + seed)
    shape = tuple(int(s) for s in torch.randint(1, 30, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g))
    dim = int(torch.randint(0, len(shape), (1,), generator=g))
    k = int(torch.randint(1, shape[dim] + 1, (1,), generator=g))
    x = torch.randint(-3, 4, shape, generator=g).float()
    x[torch.rand(shape, generator=g) < 0.1] = float("nan")
    x = x.to(device)
    for fn in (lambda x: torch.median(x, dim), lambda x: torch.kthvalue(x, k, dim), lambda x: torch.nanmedian(x, dim)):
        (values, positions), _ = _compiled(fn, [x])
        want_values, _ = fn(x)
        assert torch.allclose(values, want_values, equal_nan=True)
        held = torch.gather(x, dim, positions.unsqueeze(dim)).squeeze(dim)
        assert torch.allclose(held, values, equal_nan=True)


@pytest.mark.parametrize("nan", [False, True])
def test_quantiles_run_in_generated_kernels(device, nan):
    """torch.quantile and nanquantile are a sort and reads of it once decomposed: no ATen call."""
    import autofuse
    from autofuse.api import Recorder
    x = rand((7, 300), device=device)
    if nan:
        x[0, 3] = float("nan")
    fn = lambda x: (torch.quantile(x, 0.3, dim=1), torch.nanquantile(x, 0.7, dim=1))   # noqa: E731
    rec = Recorder()
    got = autofuse.compile(fn, strict=True, use_db=False, recorder=rec)(x)
    for g, w in zip(got, fn(x)):
        assert torch.allclose(g, w, equal_nan=True)
    kernels = [k for _, _, art in rec.graphs for k in art.kernels]
    assert kernels and all(k.kind != "fallback" for k in kernels), [k.aten_ops for k in kernels]


@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True)])
def test_nanmedian_skips_nan(device, dim, keepdim):
    """The median of each row's numbers; a row of NaN alone gives NaN (eager's position for it is
    its partition's, so only rows holding numbers compare positions)."""
    x = _ties_free((6, 37, 5), device)
    x[0, 3, 1] = x[0, 9, 1] = float("nan")
    x[1, :, 2] = float("nan")
    fn = lambda x: torch.nanmedian(x * 2, dim, keepdim=keepdim)   # noqa: E731
    (values, positions), kernels = _compiled(fn, [x])
    want_values, want_positions = fn(x)
    assert torch.allclose(values, want_values, equal_nan=True)
    numbers = ~torch.isnan(want_values)
    assert torch.equal(positions[numbers], want_positions[numbers])
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]


def test_nanmedian_of_the_whole_tensor_and_of_integers(device):
    x = _ties_free((5, 9), device)
    x[1, 1] = float("nan")
    got, _ = _compiled(lambda x: torch.nanmedian(x), [x])
    assert_close(got if isinstance(got, torch.Tensor) else got[0], torch.nanmedian(x))
    ints = (x.nan_to_num() * 7).int()
    fn = lambda t: torch.nanmedian(t, 1)   # noqa: E731
    (values, positions), _ = _compiled(fn, [ints])
    assert torch.equal(values, fn(ints)[0])
    # integers tie: CUDA's eager names any position holding the median, ours the stable sort's
    assert torch.equal(ints.gather(1, positions[:, None])[:, 0], values)
    if device == "cpu":
        assert torch.equal(positions, fn(ints)[1])
