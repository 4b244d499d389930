"""Accumulating scatters (index_put with accumulate, index_add, scatter_add, scatter_reduce's sum) as
generated kernels that add with tl.atomic_add into a fresh copy of the updated tensor: compared with
eager on random inputs with repeated, negative and broadcast indices, non-contiguous operands and
every atomic dtype; the cases without atomics (bf16, other reductions, deterministic mode) run as
ATen fallbacks; the scatter fused into an embedding + LayerNorm backward's row kernel; consumers of
the result, the updated input left unchanged, and repeated calls not accumulating across calls."""
import warnings

import pytest
import torch

import autofuse
from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.trace import compile_traced
from tests.helpers import assert_close, kernels_of, rand

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)
aten = torch.ops.aten


def compiled_and_compared(fn, args, atol=None, rtol=None):
    """Compiled strictly on poisoned buffers, run, compared with eager: (compiled, its kernels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_traced(fn, args, OPTIONS)
        actual = compiled(*args)
    expected = fn(*args)
    multi = isinstance(expected, (list, tuple))
    assert_close(actual if multi else actual[0], expected, atol=atol, rtol=rtol)
    return compiled, kernels_of(compiled)


def check(fn, args, *, fallback=False, atol=None, rtol=None):
    """Compiled and compared with eager; a generated scatter has a kernel with tl.atomic_add and no
    fallback, `fallback`: the scatter runs as an ATen op, no atomics."""
    compiled, infos = compiled_and_compared(fn, args, atol, rtol)
    atomic = [k for k in infos if "tl.atomic_add(" in k.source]
    fallbacks = [k for k in infos if k.kind == "fallback"]
    if fallback:
        assert fallbacks and not atomic, [(k.kind, k.aten_ops) for k in infos]
    else:
        assert atomic and not fallbacks, [(k.kind, k.aten_ops) for k in infos]
    return compiled, infos


def ids(n, *shape, device):
    """Indices in [0, n), with repeats where there are more of them than positions."""
    return torch.randint(0, n, shape).to(device)


# ---- index_put with accumulate --------------------------------------------------------------

def test_index_put_repeated_rows(device):
    x, v, i = rand((37, 24), device=device), rand((200, 24), device=device), ids(37, 200, device=device)
    check(lambda x, i, v: x.index_put([i], v, accumulate=True), [x, i, v])


def test_index_put_two_broadcast_indices(device):
    # [5, 1] and [1, 7] broadcast to [5, 7] positions in dims 0 and 1; then a [6] row added at each
    x = rand((13, 11, 6), device=device)
    i, j = ids(13, 5, 1, device=device), ids(11, 1, 7, device=device)
    check(lambda x, i, j, v: x.index_put([i, j], v, accumulate=True), [x, i, j, rand((5, 7, 6), device=device)])
    check(lambda x, i, j, v: x.index_put([i, j], v, accumulate=True), [x, i, j, rand((6,), device=device)])


def test_index_put_after_a_slice_and_non_adjacent(device):
    x = rand((9, 53, 7), device=device)
    i = ids(53, 40, device=device)
    check(lambda x, i, v: aten.index_put(x, [None, i], v, True), [x, i, rand((9, 40, 7), device=device)])
    # indices in dims 0 and 2: the indexed dim goes first in the values, then the sliced dim
    i0, i2 = ids(9, 30, device=device), ids(7, 30, device=device)
    check(lambda x, a, b, v: aten.index_put(x, [a, None, b], v, True), [x, i0, i2, rand((30, 53), device=device)])


def test_index_put_broadcast_row_and_negative_indices(device):
    x, row = rand((37, 24), device=device), rand((24,), device=device)
    i = ids(37, 64, device=device) - 37          # -37 .. -1
    check(lambda x, i, r: x.index_put([i], r, accumulate=True), [x, i, row])


def test_index_put_non_contiguous_operands(device):
    x, v = rand((37, 24), device=device, noncontig=True), rand((50, 24), device=device, noncontig=True)
    assert not x.is_contiguous() and not v.is_contiguous()
    check(lambda x, i, v: x.index_put([i], v, accumulate=True), [x, ids(37, 50, device=device), v])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16])
def test_index_put_dtypes(device, dtype):
    """f32, f64, i64, i32 add atomically; bf16 has no atomic add here and runs as ATen's op."""
    x, v = rand((37, 5), dtype, device=device), rand((120, 5), dtype, device=device)
    check(lambda x, i, v: x.index_put([i], v, accumulate=True), [x, ids(37, 120, device=device), v],
          fallback=dtype == torch.bfloat16)


# ---- scatters without accumulate: stores ---------------------------------------------------

def check_stores(fn, args):
    """Compiled and compared with eager: one generated kernel stores the values at their indices
    (no atomics), no ATen fallback."""
    _, infos = compiled_and_compared(fn, args)
    assert not [k for k in infos if k.kind == "fallback" or "tl.atomic_add(" in k.source], \
        [(k.kind, k.aten_ops) for k in infos]
    return infos


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_put_without_accumulate_stores(device, dtype):
    x, v = rand((37, 5), dtype, device=device), rand((10, 5), dtype, device=device)
    i = torch.randperm(37)[:10].to(device)      # distinct: eager's result does not depend on an order
    check_stores(lambda x, i, v: (x * 2).index_put([i], v), [x, i, v])


@pytest.mark.parametrize("make", ["empty_like", "empty", "new_empty_strided"])
def test_an_inverse_permutation_scattered_into_empty_memory_is_generated(device, make):
    """`inv = empty_like(perm); inv[perm] = arange(n)` (a mixture of experts' unsort): no allocation
    call and no copy of the uninitialized memory, every element written by the scatter."""
    def inverse(perm):
        n = perm.shape[0]
        if make == "empty_like":
            inv = torch.empty_like(perm)
        elif make == "empty":
            inv = torch.empty(n, dtype=perm.dtype, device=perm.device)
        else:
            inv = perm.new_empty_strided((n,), (1,))
        inv[perm] = torch.arange(n, device=perm.device)
        return inv * 3 + 1
    perm = torch.randperm(53).to(device)
    compiled, kernels = compiled_and_compared(inverse, [perm])
    assert all(k.kind != "fallback" for k in kernels), [k.aten_ops for k in kernels]
    # the scatter's output is allocated, not filled first by a kernel of its own (one reading nothing)
    assert all(k.reads for k in kernels), [(k.name, k.reads) for k in kernels]


def test_a_store_scatter_updating_a_graph_input_in_place_is_atens_op(device):
    """A static cache updated in place: ATen's in-place op writes only the new positions, where a
    generated scatter would copy the whole cache first. Out of place, into an input, it is a
    generated store."""
    x, v = rand((37, 5), device=device), rand((10, 5), device=device)
    i = torch.randperm(37)[:10].to(device)
    check_stores(lambda x, i, v: (x.index_put([i], v), x.scatter(0, i[:, None].expand(10, 5), v)), [x, i, v])

    def update(x, i, v):
        x.index_put_([i], v)
        return x.sum(0)
    rec = Recorder()
    expected_x = x.clone()
    expected = update(expected_x, i, v)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = autofuse.compile(update, strict=True, poison=True, recorder=rec)(x, i, v)
    assert_close(actual, expected)
    assert_close(x, expected_x)
    kernels = [k for _, _, art in rec.graphs for k in art.kernels]
    assert ("index_put",) in [k.aten_ops for k in kernels if k.kind == "fallback"], \
        [(k.kind, k.aten_ops) for k in kernels]


def test_index_put_without_accumulate_broadcast_value_and_two_indices(device):
    x = rand((9, 11, 4), device=device)
    i, j = torch.randperm(9)[:5].to(device), torch.randperm(11)[:5].to(device)
    v = rand((4,), device=device)
    check_stores(lambda x, i, j, v: x.sin().index_put([i, j], v * 2), [x, i, j, v])


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_index_copy(device, dim):
    x = rand((6, 7, 9), device=device)
    n = x.shape[dim]
    i = torch.randperm(n)[:n // 2 + 1].to(device)
    shape = list(x.shape)
    shape[dim] = len(i)
    src = rand(tuple(shape), device=device)
    check_stores(lambda x, i, s: (x - 1).index_copy(dim, i, s + 1), [x, i, src])


def distinct_along(dim, n, shape, device):
    """An index of `shape` whose entries along `dim` are distinct positions in [0, n) (a prefix of a
    permutation per line), so that eager's result does not depend on an order."""
    lines = torch.rand(*shape[:dim], n, *shape[dim + 1:]).argsort(dim)
    return lines.narrow(dim, 0, shape[dim]).contiguous().to(device)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_from_a_source_stores(device, dim, dtype):
    """The general scatter: src's elements (a source larger than its index) at index's positions."""
    x, src = rand((6, 13, 9), dtype, device=device), rand((7, 13, 10), dtype, device=device)
    shape = [5, 11, 8]
    d = dim % 3
    i = distinct_along(d, x.shape[d], shape, device)
    check_stores(lambda x, i, s: (x * 2).scatter(dim, i, s + 1), [x, i, src])


def test_scatter_of_a_value_non_contiguous(device):
    x = rand((13, 9), device=device, noncontig=True)
    i = distinct_along(1, 9, [13, 4], device).t().contiguous().t()    # a transposed index
    assert not x.is_contiguous() and not i.is_contiguous()
    check_stores(lambda x, i: x.exp().scatter(1, i, -2.5), [x, i])
    check_stores(lambda x, i: (x > 0).scatter(1, i, True), [x, i])


def test_static_kv_cache_update(device):
    """transformers' static cache: the new keys written at cache_position (an arange) into a clone
    of the cache, in bf16, the written prefix returned."""
    cache, new = rand((2, 3, 11, 5), torch.bfloat16, device=device), rand((2, 3, 3, 5), torch.bfloat16, device=device)

    def f(cache, new):
        pos = torch.arange(4, 7, device=new.device)
        out = cache.clone()
        out.index_copy_(2, pos, new)
        return out[:, :, :7]
    check_stores(f, [cache, new])


# ---- index_add, scatter_add, scatter_reduce -------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("alpha", [1, 2.5])
def test_index_add(device, dim, alpha):
    x = rand((37, 24), device=device)
    src = rand((60, 24) if dim == 0 else (37, 60), device=device)
    i = ids(x.shape[dim], 60, device=device)
    check(lambda x, i, s: torch.index_add(x, dim, i, s, alpha=alpha), [x, i, src])


def test_index_add_and_scatter_add_return_eager_s_contiguous_layout(device):
    """Eager's index_add and scatter_add return a contiguous tensor whatever the updated tensor's
    layout (index_put keeps it): a permuted input's result has eager's strides, and index_add,
    lowered as itself, copies the input once (its decomposition made it contiguous first)."""
    x = rand((4, 27, 3), device=device).permute(2, 1, 0)
    i = torch.tensor([0, 1, 0, 1], device=x.device)
    _, infos = check(lambda x, i: x.index_add(2, i, x, alpha=2.5), [x, i])
    assert len(infos) == 2, [(k.kind, k.aten_ops) for k in infos]   # the copy, the atomic adds
    check(lambda x, i: x.scatter_add(2, i.expand(3, 27, 4).contiguous(), x), [x, i])
    check(lambda x, i: aten.index_put(x, [None, None, i], x, True), [x, i])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_with_an_index_smaller_than_src(device, dim):
    x, src = rand((13, 24), device=device), rand((20, 30), device=device)
    d = dim % 2
    shape = (20, 9) if d == 0 else (8, 30)       # index spans src's scattered dim, is smaller in the other
    i = ids(x.shape[d], *shape, device=device)
    check(lambda x, i, s: x.scatter_add(dim, i, s), [x, i, src])


def test_scatter_add_3d(device):
    x, src = rand((6, 11, 5), device=device), rand((7, 20, 5), device=device)
    check(lambda x, i, s: x.scatter_add(1, i, s), [x, ids(11, 6, 18, 4, device=device), src])


def test_scatter_reduce_sum(device):
    x, src = rand((13, 24), device=device), rand((30, 24), device=device)
    i = ids(13, 30, 24, device=device)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, "sum", include_self=True), [x, i, src])


def atomics_of(infos) -> set[str]:
    return {op for k in infos for op in ("tl.atomic_add(", "tl.atomic_max(", "tl.atomic_min(") if op in k.source}


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce_modes(device, reduce, include_self, dtype):
    """Repeated indices (30 rows into 13, an index narrower than src), positions never written keep
    x's values; mean of integers stays ATen's op (floor division)."""
    x, src = rand((13, 7), dtype, device=device), rand((30, 9), dtype, device=device, noncontig=True)
    i = ids(13, 30, 7, device=device)
    fn = lambda x, i, s: (x + 1).scatter_reduce(0, i, s, reduce, include_self=include_self)  # noqa: E731
    if reduce == "mean" and dtype == torch.int64:
        check(fn, [x, i, src], fallback=True)
        return
    _, infos = compiled_and_compared(fn, [x, i, src])
    assert not [k for k in infos if k.kind == "fallback"], [(k.kind, k.aten_ops) for k in infos]
    expected = {"sum": set(), "mean": set(), "amax": {"tl.atomic_max("}, "amin": {"tl.atomic_min("}}[reduce]
    if reduce != "amax" and reduce != "amin" or dtype.is_floating_point:
        expected.add("tl.atomic_add(")     # sums, counts, and a floating extremum's NaNs counted apart
    assert atomics_of(infos) == expected


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin"])
def test_scatter_reduce_of_bool_values_runs_as_aten(device, reduce):
    """There are no bool atomics: the op stays ATen's, between generated kernels."""
    x, src = rand((13, 7), device=device) > 0, rand((30, 9), device=device) > 0
    if device == "cuda" and reduce != "sum":
        with pytest.raises(NotImplementedError):
            x.scatter_reduce(0, ids(13, 30, 7, device=device), src, reduce, include_self=False)
        pytest.skip("ATen's CUDA scatter_reduce has no bool amax / amin")
    check(lambda x, i, s: (x | x).scatter_reduce(0, i, s, reduce, include_self=False),
          [x, ids(13, 30, 7, device=device), src], fallback=True)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_extremum_keeps_nans(device, reduce, include_self):
    """A NaN among the values, or in x with include_self, makes its position NaN, as in eager."""
    x, src = rand((13, 7), device=device), rand((30, 7), device=device)
    x[2, 3], x[5, 0] = float("nan"), float("nan")
    src[4, 1], src[9, 6], src[11, 2] = float("nan"), float("nan"), float("inf")
    i = ids(13, 30, 7, device=device)
    i[4, 1], i[9, 6] = 5, 2       # onto x's NaNs' rows, other columns
    compiled_and_compared(lambda x, i, s: (x * 3).scatter_reduce(0, i, s, reduce, include_self=include_self),
                          [x, i, src])


def test_scatter_reduce_prod_and_half_precision_are_atens(device):
    x, src = rand((13, 7), device=device), rand((30, 7), device=device)
    i = ids(13, 30, 7, device=device)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, "prod"), [x, i, src], fallback=True)
    xh, sh = x.to(torch.bfloat16), src.to(torch.bfloat16)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), [xh, i, sh], fallback=True)


# ---- deterministic mode ---------------------------------------------------------------------

def test_deterministic_mode_keeps_atens_sorted_scatter(device):
    """Atomic adds sum in a varying order: deterministic mode runs ATen's op, traced or compiled."""
    x, v, i = rand((37, 24), device=device), rand((90, 24), device=device), ids(37, 90, device=device)
    fn = lambda x, i, v: x.index_put([i], v, accumulate=True) * 2   # noqa: E731
    torch.use_deterministic_algorithms(True)
    try:
        check(fn, [x, i, v], fallback=True)
        torch._dynamo.reset()
        rec = Recorder()
        out = autofuse.compile(fn, strict=True, poison=True, recorder=rec)(x, i, v)
        assert_close(out, fn(x, i, v))
        kernels = [k for _, _, art in rec.graphs for k in art.kernels]
        assert kernels and not any("tl.atomic_add(" in k.source for k in kernels)
        assert any(k.kind == "fallback" for k in kernels)
    finally:
        torch.use_deterministic_algorithms(False)
        torch._dynamo.reset()


# ---- fusion ---------------------------------------------------------------------------------

def test_embedding_gradient_fused_into_the_layer_norm_backward(device):
    """The embedding's weight gradient (repeated tokens summed, the padding row zero) is added
    atomically as the layer norm's backward computes each row: one reduction kernel with atomics."""
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.Embedding(53, 24, padding_idx=3), torch.nn.LayerNorm(24)).to(device)
    m2 = torch.nn.Sequential(torch.nn.Embedding(53, 24, padding_idx=3), torch.nn.LayerNorm(24)).to(device)
    m2.load_state_dict(m.state_dict())
    tok = ids(53, 4, 37, device=device)
    tok[0, :5] = 7
    tok[1, :4] = 3
    w = torch.randn(4, 37, 24, device=device)
    rec = Recorder()
    compiled = autofuse.compile(m2, strict=True, poison=True, recorder=rec)
    (m(tok) * w).sum().backward()
    (compiled(tok) * w).sum().backward()
    for p1, p2 in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p2.grad, p1.grad, rtol=1e-4, atol=1e-5)
    assert not m2[0].weight.grad[3].any()
    (backward,) = [art for label, _, art in rec.graphs if label == "backward"]
    kinds = [(k.kind, k.aten_ops) for k in backward.kernels]
    assert not [k for k in backward.kernels if k.kind == "fallback"], kinds
    assert any(k.kind == "reduction" and "tl.atomic_add(" in k.source for k in backward.kernels), kinds


# ---- consumers, inputs, repeated calls ------------------------------------------------------

def test_consumers_of_the_result(device):
    x, v, i = rand((37, 24), device=device), rand((80, 24), device=device), ids(37, 80, device=device)
    _, infos = check(lambda x, i, v: x.index_put([i], v, accumulate=True) * 2 + 1, [x, i, v])
    assert len(infos) >= 3      # copy, scatter, and the pointwise reading the result in a later kernel
    check(lambda x, i, v: x.index_put([i], v, accumulate=True).sum(-1), [x, i, v], atol=1e-4)

    def with_zeros(i, v):       # the result and another value of the same zeros
        z = torch.zeros(37, 24, device=v.device)
        return z.index_put([i], v, accumulate=True), z + v[:37].exp()
    check(with_zeros, [i, v])
    check(lambda i, v: torch.zeros(37, 24, device=v.device).index_put([i], v, accumulate=True), [i, v])


def test_updated_input_is_unchanged(device):
    """The scatter adds into a copy: the graph's input keeps its values (functional semantics)."""
    x, v, i = rand((37, 24), device=device), rand((80, 24), device=device), ids(37, 80, device=device)
    before = x.clone()
    check(lambda x, i, v: x.index_put([i], v, accumulate=True), [x, i, v])
    assert torch.equal(x, before)
    check(lambda x, i, s: x.scatter_add(0, i, s), [x, ids(37, 80, 24, device=device), v])
    assert torch.equal(x, before)


def test_repeated_calls_do_not_accumulate(device):
    """The target is re-initialized each call: a second call on the same inputs gives the same
    result (integers: exactly, whatever order the atomics ran in)."""
    x, v = rand((37, 24), torch.int64, device=device), rand((80, 24), torch.int64, device=device)
    i = ids(37, 80, device=device)
    compiled, _ = check(lambda x, i, v: x.index_put([i], v, accumulate=True) + 1, [x, i, v])
    first, second = compiled(x, i, v)[0], compiled(x, i, v)[0]
    assert torch.equal(first, second)
    assert torch.equal(second, x.index_put([i], v, accumulate=True) + 1)


def test_the_config_search_checks_each_scatter_variant_from_the_same_start(tmp_path):
    """The search runs a kernel's config variants inside the running program: a scatter's variant
    adds into the target's content as it was before the default config ran, so none of them is
    rejected as computing wrong values."""
    from autofuse.measure.timing import FakeBenchmarker
    from autofuse.search.graph_tuner import TuneSettings
    from autofuse.search.settings import KernelTuneSettings

    def f(idx, src):
        return torch.zeros(11, 7, device=src.device).index_add(0, idx, src.sin()) * 2

    settings = TuneSettings(db=str(tmp_path / "t.db"), progress=False, compare_torch_compile=False, finalists=2,
                            runner_ups=0, rounds=1, trials=3,
                            kernel=KernelTuneSettings(top_k=4, explore=0.0, refine=2))
    args = [ids(11, 40, device=rand((1,)).device), rand((40, 7))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = autofuse.tune(f, args, settings=settings,
                            benchmarker=FakeBenchmarker(lambda rec: 10.0 + rec["config"]["XBLOCK"] / 1024))
    failures = [fl for g in res.graphs for fl in g.failures]
    assert res.graphs and not failures, failures
    assert not res.errors, res.errors


# ---- index_put with a bool mask: a where ---------------------------------------------------------
def _relu_mask(x):
    x = x * 2
    x[x < 0] = 0
    return x


def _nan_to_zero(x):
    y = x / (x - x.flip(1))
    y[y != y] = 0.0
    return y


def _column_mask(x):
    y = x * 1
    y[:, x[0] > 0] = -5.0
    return y


MASKED_PUTS = {
    "scalar": (_relu_mask, lambda d: [rand((6, 9), device=d)]),
    "nan-to-zero": (_nan_to_zero, lambda d: [rand((6, 9), device=d)]),
    "tensor-value": (lambda x, v: torch.index_put(x, (x > 0,), v), lambda d: [rand((6, 9), device=d),
                                                                           torch.tensor(3.0, device=d)]),
    "row-mask-row-value": (lambda x, r: torch.index_put(x, (x[:, 0] > 0,), r), lambda d: [rand((6, 9), device=d),
                                                                                         rand((9,), device=d)]),
    "column-mask": (_column_mask, lambda d: [rand((6, 9), device=d)]),
    "accumulate": (lambda x, v: torch.index_put(x, (x > 0,), v, accumulate=True),
                   lambda d: [rand((6, 9), device=d), torch.tensor(2.5, device=d)]),
    "transposed": (lambda x: torch.index_put(x.t(), (x.t() < 0,), torch.tensor(1.0, device=x.device)),
                   lambda d: [rand((6, 9), device=d)]),
    "int32": (lambda x: torch.index_put(x, (x < 0,), torch.tensor(0, dtype=torch.int32, device=x.device)),
              lambda d: [torch.randint(-5, 5, (6, 9), dtype=torch.int32).to(d)]),
    "bf16": (lambda x: torch.index_put(x, (x > 1,), torch.tensor(1.0, dtype=torch.bfloat16, device=x.device)),
             lambda d: [rand((6, 9), torch.bfloat16, device=d)]),
    "mask-over-two-dims": (lambda x, m: torch.index_put(x, (m,), torch.tensor(0.5, device=x.device)),
                           lambda d: [rand((2, 3, 9), device=d), (torch.rand(2, 3) > 0.5).to(d)]),
}


@pytest.mark.parametrize("case", list(MASKED_PUTS))
def test_index_put_with_a_bool_mask_is_a_where(device, case):
    """`x[mask] = v` with a value that does not vary along the selected elements: one pointwise
    kernel with what computes x and the mask, no ATen call (the mask's count of True would make the
    values' shape data-dependent)."""
    fn, make = MASKED_PUTS[case]
    compiled, kernels = compiled_and_compared(fn, make(device))
    assert [k.kind for k in kernels] == ["pointwise"], [(k.kind, k.aten_ops) for k in kernels]


def test_index_put_of_selected_values_stays_atens(device):
    """`y[m] = src[m]`: the values follow the mask's True elements one by one: ATen's op, correct."""
    def fn(x, m):
        return torch.index_put(x, (m,), x.flip(0)[m])
    x = rand((6, 9), device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = autofuse.compile(fn, use_db=False, poison=True)(x, x > 0.5)
    assert_close(out, fn(x, x > 0.5))


@pytest.mark.parametrize("seed", range(12))
def test_index_put_with_a_bool_mask_fuzz(device, seed):
    """Random rank, masked dims (one run of consecutive dims), value shape broadcast over the rest,
    dtype, accumulate."""
    g = torch.Generator().manual_seed(seed)
    ndim = int(torch.randint(1, 4, (1,), generator=g))
    shape = [int(s) for s in torch.randint(1, 7, (ndim,), generator=g)]
    p = int(torch.randint(0, ndim, (1,), generator=g))
    m = int(torch.randint(1, ndim - p + 1, (1,), generator=g))
    dtype = [torch.float32, torch.bfloat16, torch.int32][seed % 3]
    x = (rand(shape, dtype) if dtype.is_floating_point else torch.randint(-9, 9, shape, dtype=dtype)).to(device)
    mask = (torch.rand(shape[p:p + m], generator=g) > 0.5).to(device)
    rest = shape[p + m:]
    value_shape = rest[int(torch.randint(0, len(rest) + 1, (1,), generator=g)):]
    value = (rand(value_shape, dtype) if dtype.is_floating_point
             else torch.randint(-9, 9, value_shape, dtype=dtype)).to(device)
    index = (None,) * p + (mask,)
    accumulate = bool(seed % 2)

    def fn(x, v):
        y = x.clone()
        return torch.ops.aten.index_put.default(y, list(index), v, accumulate)
    compiled, kernels = compiled_and_compared(fn, [x, value])
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]
