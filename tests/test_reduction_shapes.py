"""Reductions at the shapes users run, shrunk: whole-tensor norms and scalar losses, norms over
several trailing dims, group/instance norms, argmax, middle-dim sums, a written-out tanh GELU —
each compiled with the GPU's default configs scaled down (splits and looped rows forced on small
tensors) and compared with eager in every dtype it accepts, on non-power-of-two and
non-contiguous inputs; and the default plan's split and grouping for the full sizes, with the
device's SM count injected."""
from dataclasses import dataclass, replace

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.device import REFERENCE, DeviceFacts, device_facts
from autofuse.compiler import schedule
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, kernels_of, rand

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


@dataclass(frozen=True)
class SmallGpuDefaults(Heuristics):
    """The GPU's default configs, run in the interpreter, with thresholds scaled down so that small
    tensors take the paths the large ones take on the GPU: looped rows, splits, unfused consumers."""

    persistent_rnumel_max: int = 32
    looped_rblock_max: int = 64
    split_min_rnumel: int = 128
    split_min_chunk: int = 64
    split_outer_min_rnumel: int = 128
    split_outer_min_chunk: int = 16
    split_min_elements: int = 1
    split_outer_min_elements: int = 1
    split_target_warps_per_sm: int = 2
    multipass_min_rnumel: int = 128

    def launch_config(self, kind, numel, rnumel, interpret, *args, **kw):
        return super().launch_config(kind, numel, rnumel, False, *args, **kw)


def compile_small(fn, args, *, atol=None, rtol=None):
    """Compile with SmallGpuDefaults on poisoned buffers, compare with eager twice (a split's
    counters must be back at 0 for the second call), return the kernels."""
    options = CompileOptions(strict=True, use_db=False, poison=True, heuristics=SmallGpuDefaults())
    compiled = compile_traced(fn, args, options)
    expected = fn(*args)
    for _ in range(2):
        actual = compiled(*args)
        if not isinstance(expected, (list, tuple)):
            assert len(actual) == 1
            actual = actual[0]
        assert_close(actual, expected, atol=atol, rtol=rtol)
    return kernels_of(compiled)


def splits(kernels):
    return [k.config.split for k in kernels if k.kind == "reduction"]


def lowp_tol(dtype, scale=1.0):
    """Tolerances for a reduction of many half-precision values (eager rounds differently)."""
    return {} if dtype == torch.float32 else {"atol": 5e-2 * scale, "rtol": 5e-2 * scale}


# ---- whole-tensor norms and scalar losses --------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("noncontig", [False, True])
def test_whole_tensor_norm_splits(dtype, noncontig):
    x = rand((37, 61), dtype, noncontig=noncontig)
    ks = compile_small(lambda x: torch.linalg.vector_norm(x), [x], **lowp_tol(dtype))
    assert splits(ks) and all(s > 1 for s in splits(ks))


@pytest.mark.parametrize("dtype", FLOATS)
def test_norm_then_divide_runs_split_and_apart(dtype):
    # the division reads the norm inside the r loop: fused, the kernel could not split
    x = rand((3, 5, 29, 31), dtype, noncontig=True)
    ks = compile_small(lambda x: x / torch.norm(x, p="fro"), [x], **lowp_tol(dtype))
    assert splits(ks) == [splits(ks)[0]] and splits(ks)[0] > 1
    assert [k.kind for k in ks] == ["reduction", "pointwise"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("loss", ["mse", "huber", "smooth_l1", "kl", "hinge", "l1"])
def test_scalar_losses_split(dtype, loss):
    a, b = rand((53, 97), dtype), rand((53, 97), dtype, noncontig=True)
    fns = {
        "mse": lambda a, b: torch.mean((a - b) ** 2),
        "huber": lambda a, b: F.huber_loss(a, b, delta=0.7),
        "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b),
        "kl": lambda a, b: F.kl_div(torch.log_softmax(a, -1), torch.softmax(b, -1), reduction="batchmean"),
        "hinge": lambda a, b: torch.mean(torch.clamp(1 - a * b[:, :1], min=0)),
        "l1": lambda a, b: F.l1_loss(a, b, reduction="sum"),
    }
    ks = compile_small(fns[loss], [a, b], **lowp_tol(dtype, 4.0 if loss == "l1" else 1.0))
    if loss == "kl":   # summed per row in the log-softmax's kernel, then the rows' sums totalled
        assert [(k.kind, k.numel, k.rnumel) for k in ks] == [("reduction", 53, 97), ("reduction", 1, 53)]
    else:
        assert any(s > 1 for s in splits(ks))


WHOLE_SUMS_OF_ROW_TERMS = {
    "kl_sum": (lambda a, b: F.kl_div(torch.log_softmax(a, -1), b, reduction="sum"), (29, 301)),
    "layer_norm_sum_keepdim": (lambda a, b: (F.layer_norm(a, (a.shape[-1],)) * b).sum((0, 1), keepdim=True),
                               (29, 301)),
    "softmax_3d_mean": (lambda a, b: (torch.softmax(a, -1) * b).mean(), (3, 7, 77)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(WHOLE_SUMS_OF_ROW_TERMS))
def test_whole_sum_of_row_normalized_terms_is_summed_in_the_rows_kernel(dtype, case):
    """A sum over every element of terms that read their row's statistics (a KL divergence of a
    log-softmax, a layer norm's output times a target) is summed row by row in the kernel that
    computes the statistics (looped rows here), then the rows' sums are totalled: two kernels, the
    statistics never stored. (A transposed target is correct too; at these shapes its row sums'
    default config splits their rows, which keeps them apart.)"""
    fn, shape = WHOLE_SUMS_OF_ROW_TERMS[case]
    a, b = rand(shape, dtype), rand(shape, dtype)
    compile_small(fn, [a, rand(shape, dtype, noncontig=True)], **lowp_tol(dtype, 4.0))
    ks = compile_small(fn, [a, b], **lowp_tol(dtype, 4.0))
    rows = 1
    for n in shape[:-1]:
        rows *= n
    assert [(k.kind, k.numel, k.rnumel) for k in ks] == [("reduction", rows, shape[-1]), ("reduction", 1, rows)]
    assert not ks[0].config.persistent


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16])
def test_whole_tensor_sum_of_integers_and_halves(dtype):
    x = rand((45, 77), dtype, noncontig=True)
    ks = compile_small(lambda x: x.sum(), [x], **lowp_tol(dtype, 4.0) if dtype.is_floating_point else {})
    assert splits(ks) == [splits(ks)[0]] and splits(ks)[0] > 1


def test_whole_tensor_max_min_with_nan():
    x = rand((41, 53))
    x[17, 9] = float("nan")
    compile_small(lambda x: (x.amax(), x.abs().amin()), [x])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_max_and_min_without_a_dim_are_generated(dtype):
    """x.max() and x.min() (aten.max.default): the value over every element, split like amax."""
    x = rand((41, 53), dtype, noncontig=True)
    if dtype == torch.float32:
        x[17, 9] = float("nan")
    ks = compile_small(lambda x: (x.max(), torch.min(x.t())), [x])
    assert all(k.kind != "fallback" for k in ks) and splits(ks)[0] > 1


# ---- norms over several dims, group and instance norms ---------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_over_trailing_dims(dtype):
    x = rand((5, 6, 7, 9), dtype, noncontig=True)
    w, b = rand((6, 7, 9), dtype), rand((6, 7, 9), dtype)
    ks = compile_small(lambda x, w, b: F.layer_norm(x, x.shape[1:], w, b), [x, w, b], **lowp_tol(dtype))
    assert all(k.config.persistent is False for k in ks if k.kind == "reduction")  # rows of 378: looped


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_and_instance_norm(dtype):
    x = rand((3, 6, 11, 13), dtype).permute(0, 1, 3, 2)  # non-contiguous spatial dims
    w, b = rand((6,), dtype), rand((6,), dtype)
    compile_small(lambda x, w, b: F.group_norm(x, 3, w, b), [x, w, b], **lowp_tol(dtype))
    compile_small(lambda x: F.instance_norm(x), [x], **lowp_tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("looped", [False, True])
def test_group_norm_apply_runs_in_its_statistics_kernel(dtype, looped):
    """Groups of several channels ([N, C, H, W] normalized over [N, G, C/G * H * W]): the normalize,
    the affine and the SiLU after it run in the statistics kernel, each node's channel dim cut across
    the kernel's x (its group) and r (its channel within the group); rows held whole (the defaults)
    or looped, read again in a second pass (small GPU defaults, not split)."""
    x = rand((2, 12, 7, 9), dtype).permute(0, 1, 3, 2)   # non-contiguous spatial dims
    w, b = rand((12,), dtype), rand((12,), dtype)
    unsplit = replace(SmallGpuDefaults(), split_min_rnumel=1 << 30, split_outer_min_rnumel=1 << 30)
    heur = unsplit if looped else Heuristics()
    # autotune off: the defaults' own config, not one the GPU's first compile measures
    options = CompileOptions(strict=True, use_db=False, poison=True, heuristics=heur, autotune=False)
    fn = lambda x, w, b: F.silu(F.group_norm(x, 4, w, b))
    compiled = compile_traced(fn, [x, w, b], options)
    for _ in range(2):
        assert_close(compiled(x, w, b)[0], fn(x, w, b), **lowp_tol(dtype))
    (kernel,) = kernels_of(compiled)
    assert kernel.kind == "reduction"
    if looped or x.device.type == "cpu":   # the GPU's defaults loop groups read across strided rows
        assert kernel.config.persistent != looped


@pytest.mark.parametrize("dtype", FLOATS)
def test_reduction_over_several_non_contiguous_dims(dtype):
    x = rand((7, 9, 11, 5), dtype).permute(2, 0, 3, 1)   # [11, 7, 5, 9], strides out of order
    compile_small(lambda x: (x.sum((1, 3)), x.mean((0, 2)), x.amax((1, 2))), [x], **lowp_tol(dtype))


# ---- argmax, middle-dim sums -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64])
def test_argmax_argmin_over_a_dim(dtype):
    x = rand((43, 300), dtype, low=-50, high=50)  # ties (ints, bf16) go to the first index, as in eager
    compile_small(lambda x: (x.argmax(1), x.argmin(0), x.t().argmax(1)), [x])


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_sum_and_mean_over_a_middle_dim(dtype):
    x = rand((6, 333, 7), dtype)
    fns = [lambda x: x.sum(1)] + ([lambda x: x.mean(1)] if dtype.is_floating_point else [])
    for fn in fns:
        ks = compile_small(fn, [x], **lowp_tol(dtype))
        assert any(s > 1 for s in splits(ks))  # 42 outputs, rows of 333: the outer reduction splits


# ---- written-out tanh GELU -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_tanh_gelu_written_out_multiplies(dtype):
    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3))))
    x = rand((37, 101), dtype, noncontig=True)
    (k,) = compile_small(gelu, [x])
    assert "_pow(" not in k.source.split("@triton.jit")[-1]


@pytest.mark.parametrize("exponent", [3.0, 4.0, 5.0, -2.0, -3.0, 2.5])
def test_pow_by_a_constant(exponent):
    x = rand((29, 31), low=0.5, high=2.0)
    compile_small(lambda x: torch.pow(x, exponent) - x.neg().pow(exponent).abs(), [x], rtol=1e-5, atol=1e-5)


# ---- the default plan at full size, device facts injected ----------------------------------------------
def meta_groups(fn, shapes, heuristics=None):
    args = [torch.empty(s, device="meta") for s in shapes]
    return schedule(trace_aten(fn, args), args,
                    CompileOptions(strict=True, use_db=False, **({"heuristics": heuristics} if heuristics else {}))).groups


def gpu_default(g, device):
    from autofuse.codegen.split import why_not_split
    from autofuse.schedule.fusion import is_outer_reduction
    splittable = g.is_reduction and why_not_split(g.placements(), True) is None
    return Heuristics().launch_config("reduction" if g.is_reduction else "pointwise", g.numel, g.rnumel, False,
                                      g.is_reduction and is_outer_reduction(g), legal={"split": splittable},
                                      device=device)


@pytest.mark.parametrize("sms", [16, 132, 264])
def test_whole_tensor_sum_fills_the_gpu(sms):
    device = DeviceFacts("test gpu", sms)
    (g,) = meta_groups(lambda x: x.sum(), [(1 << 30,)])
    cfg = gpu_default(g, device)
    assert cfg.split * cfg.num_warps >= 16 * sms   # >= 2 programs of 8 warps per SM
    assert cfg.split * cfg.num_warps <= 64 * sms   # ... and all of them resident at once
    assert cfg.split & (cfg.split - 1) == 0


def test_split_follows_the_sm_count_and_stays_off_in_the_interpreter():
    h = Heuristics()
    small, big = DeviceFacts("small", 20), DeviceFacts("big", 200)
    assert h.launch_config("reduction", 1, 1 << 30, False, legal={"split": True}, device=small).split \
        < h.launch_config("reduction", 1, 1 << 30, False, legal={"split": True}, device=big).split
    assert h.launch_config("reduction", 1, 1 << 30, True, legal={"split": True}, device=big).split == 1
    # a grid of 300 rows fills a GPU of 132 SMs, not one of 200
    assert h.launch_config("reduction", 300, 1 << 16, False, legal={"split": True}, device=REFERENCE).split == 1
    assert h.launch_config("reduction", 300, 1 << 16, False, legal={"split": True}, device=big).split > 1


def test_device_facts_of_the_cpu_are_the_reference():
    assert device_facts("cpu") == REFERENCE == device_facts(None)
    assert REFERENCE.sm_count > 0


def test_full_size_whole_tensor_cases_get_a_full_split():
    cases = [
        (lambda x: x / torch.norm(x, p="fro"), [(112, 64, 512, 512)]),
        (lambda a, b: torch.mean((a - b) ** 2), [(32768, 32768)] * 2),
        (lambda a, b: F.smooth_l1_loss(a, b), [(32768, 32768)] * 2),
        (lambda a, b: torch.mean(torch.clamp(1 - a * b, min=0)), [(32768, 32768), (32768, 1)]),
    ]
    for fn, shapes in cases:
        groups = meta_groups(fn, shapes)
        red = [g for g in groups if g.is_reduction]
        assert len(red) == 1
        cfg = gpu_default(red[0], REFERENCE)
        assert cfg.split >= 2 * REFERENCE.sm_count * 8 // cfg.num_warps // 2 > 64, cfg
        for g in groups:  # every other kernel is pointwise over the whole tensor
            assert g is red[0] or g.numel >= 1 << 28


def test_small_tensor_norm_and_division_stay_one_kernel():
    # below the split's size the reduction would not split: the division fuses into the reduction's kernel
    groups = meta_groups(lambda x: x / torch.norm(x), [(64, 100)])
    assert len(groups) == 1


def test_layer_norm_with_few_long_rows_splits_its_sums():
    groups = meta_groups(lambda x: F.layer_norm(x, x.shape[1:]), [(128, 64, 32, 32)])
    reds = [g for g in groups if g.is_reduction]
    assert reds and all(gpu_default(g, REFERENCE).split > 1 for g in reds)
    assert all(g.numel * gpu_default(g, REFERENCE).split >= 2 * REFERENCE.sm_count for g in reds)


def test_split_search_range_reaches_the_default():
    from autofuse.plan.space import CONFIG_RANGES
    from autofuse.search.candidates import neighbour_configs
    (g,) = meta_groups(lambda x: x.sum(), [(1 << 30,)])
    cfg = gpu_default(g, REFERENCE)
    assert cfg.split in CONFIG_RANGES["looped"]["split"]
    near = {c.split for c in neighbour_configs(cfg, g)}
    assert {cfg.split * 2, cfg.split // 2} <= near
    assert replace(cfg, split=1) != cfg


def test_group_norm_reads_back_its_view_at_the_flat_index():
    # [N, C, H, W] viewed as [N, G, C/G*H*W] and back: the normalize kernel loads x at xindex and
    # the per-group statistics at xindex // (C/G*H*W), with no leftover division or modulo
    x = rand((3, 6, 11, 13))
    options = CompileOptions(strict=True, use_db=False, poison=True, heuristics=SmallGpuDefaults())
    compiled = compile_traced(lambda x: F.group_norm(x, 3), [x], options)
    assert_close(compiled(x)[0], F.group_norm(x, 3))
    (pw,) = [k for k in kernels_of(compiled) if k.kind == "pointwise"]
    loads = [line.strip() for line in pw.source.split("@triton.jit")[-1].splitlines() if "tl.load(" in line]
    assert loads[0].startswith("tmp0 = tl.load(in_ptr0 + (xindex), ")
    assert all("(xindex // 286)" in line for line in loads[1:]) and len(loads) == 3
    assert "%" not in "".join(loads)


def test_index_simplification_drops_low_digits_exactly():
    import itertools

    import sympy

    from autofuse.ir.index import FloorDiv, ModIndex, make_vars, simplify_index
    i1, i2, i3 = make_vars("i", 3)
    ranges = {i1: 6, i2: 11, i3: 13}
    exprs = [FloorDiv(143 * i1 + 13 * i2 + i3, 286), ModIndex(143 * i1 + 13 * i2 + i3, 286),
             FloorDiv(ModIndex(i1 * 13 + i3, 26), 13), ModIndex(ModIndex(143 * i1 + i2, 12), 4)]
    for e in exprs:
        s = simplify_index(e, ranges)
        for v in itertools.product(range(6), range(11), range(13)):
            sub = dict(zip((i1, i2, i3), v))
            assert int(s.subs(sub)) == int(e.subs(sub)), (e, s, v)
    assert simplify_index(exprs[0], ranges) == FloorDiv(i1, 2)
    assert sympy.Add.make_args(simplify_index(exprs[1], ranges)) and "286" not in str(simplify_index(exprs[1], ranges))


# ---- the GPU defaults that follow a kernel's passes ---------------------------------------------------
def _groups(fn, args):
    return [g for g in schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups
            if g.is_reduction]


def test_passes_count_reads_after_a_reduction():
    from autofuse.schedule.loops import r_passes
    x, long = rand((9, 300)), rand((5, 3000))
    assert [r_passes(g.placements()) for g in _groups(lambda x: x.sum(-1), [x])] == [1]
    assert [r_passes(g.placements()) for g in _groups(lambda x: torch.softmax(x, -1), [x])] == [3]
    # a row that fits a persistent kernel takes its variance in two passes, a looped one in one
    assert [r_passes(g.placements()) for g in _groups(lambda x: F.layer_norm(x, (300,)), [x])] == [3]
    assert [r_passes(g.placements()) for g in _groups(lambda x: F.layer_norm(x, (3000,)), [long])] == [2]


@pytest.mark.parametrize("dtype", FLOATS)
def test_column_softmax_holds_its_columns(dtype):
    """A softmax over a middle dim reads its columns again after their max and sum: its default
    holds each column whole (a persistent tile of many columns); a one-pass column sum of the same
    tensor steps through its columns."""
    x = rand((3, 300, 37), dtype)
    ks = compile_small(lambda x: torch.softmax(x, 1), [x], **lowp_tol(dtype))
    k = next(k for k in ks if k.kind == "reduction")
    assert k.config.persistent and k.config.RBLOCK >= 300 and k.config.XBLOCK >= 16
    (s,) = compile_small(lambda x: x.sum(1), [x], **lowp_tol(dtype))
    assert not s.config.persistent


def test_long_multipass_rows_take_more_warps():
    """A row read again after its statistics (layer norm) takes more warps per looped step than a
    one-pass row sum of the same length; below `multipass_min_rnumel` the two are alike."""
    long, short = rand((300, 200)), rand((300, 100))   # enough rows that neither splits
    def red(fn, x):
        ks = [k for k in compile_small(fn, [x], atol=1e-4, rtol=1e-4) if k.kind == "reduction"]
        assert len(ks) == 1
        return ks[0].config

    ln, sm = red(lambda x: F.layer_norm(x, (200,)), long), red(lambda x: x.sum(-1), long)
    assert not ln.persistent and ln.num_warps > sm.num_warps
    assert red(lambda x: F.layer_norm(x, (100,)), short).num_warps == red(lambda x: x.sum(-1), short).num_warps


@dataclass(frozen=True)
class GpuDefaults(Heuristics):
    """The GPU's default configs at their real thresholds, run in the interpreter."""

    def launch_config(self, kind, numel, rnumel, interpret, *args, **kw):
        return super().launch_config(kind, numel, rnumel, False, *args, **kw)


@pytest.mark.parametrize("fn", [lambda x: x.argmax(-1), lambda x: torch.max(x, -1), lambda x: F.layer_norm(x, (1000,)),
                                lambda x: torch.cumsum(x, -1)], ids=["argmax", "max", "layer_norm", "cumsum"])
def test_persistent_rows_of_a_thousand_at_gpu_defaults(fn):
    """Rows of 1000 take the GPU's persistent-row default (several rows per program for a reduction,
    one for a scan), an odd row count masking the last program's second row."""
    x = rand((7, 1000))
    x[2, 5] = float("nan")
    options = CompileOptions(strict=True, use_db=False, poison=True, heuristics=GpuDefaults())
    compiled = compile_traced(fn, [x], options)
    expected = fn(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    for a, e in zip(compiled(x), expected):
        assert_close(a, e, atol=1e-4, rtol=1e-4)
    (k,) = kernels_of(compiled)
    assert k.config.persistent and k.config.RBLOCK == 1024


@pytest.mark.parametrize("dtype", FLOATS)
def test_column_mean_with_a_row_writing_epilogue(dtype):
    """A mean over the columns of a transposed input times a row vector, written row-major: the
    reduction reads columns, the epilogue writes rows. Its default steps through the columns in
    blocks (16 columns by 128 rows on the GPU) instead of holding them whole."""
    from autofuse.schedule.fusion import writes_along_r
    x, v = rand((300, 40), dtype).t(), rand((300,), dtype)
    fn = lambda x, v: x.sigmoid().mean(-1, keepdim=True) * v  # noqa: E731
    (g,) = _groups(fn, [x, v])
    assert writes_along_r(g)
    assert not any(writes_along_r(g) for g in _groups(lambda x: torch.softmax(x, 1), [rand((3, 300, 37))]))
    options = CompileOptions(strict=True, use_db=False, poison=True, heuristics=GpuDefaults())
    compiled = compile_traced(fn, [x, v], options)
    assert_close(compiled(x, v)[0], fn(x, v), **lowp_tol(dtype))
    (k,) = kernels_of(compiled)
    assert not k.config.persistent and k.config.XBLOCK == 16 and k.config.RBLOCK == 128


def test_an_empty_outer_reduction_compiles(device):
    """Sums over a zero-size slice of a transposed input: the empty kernels take no lane order."""
    def f(a):
        v = (a / (a.abs() + 1)).narrow(1, 0, 0)
        return torch.where(v > v.sum(1, keepdim=True), v.sum(2, keepdim=True), 0.0)

    a = rand((8, 18, 4), device=device).permute(2, 1, 0)
    compiled = compile_traced(f, (a,), CompileOptions(strict=True, use_db=False, poison=True))
    assert_close(compiled(a)[0], f(a))


# ---- a 0-d tensor reduced over its dim 0 or -1 (eager reduces it as the tensor itself) -------------
ZERO_DIM = {
    "sum": lambda s: s.sum(0), "mean_keepdim": lambda s: s.mean(-1, keepdim=True), "amax": lambda s: s.amax((0,)),
    "prod": lambda s: s.prod(0), "var": lambda s: s.var(0), "var_mean": lambda s: torch.var_mean(s, 0, correction=0),
    "norm": lambda s: s.norm(dim=0), "logsumexp": lambda s: s.logsumexp(0), "softmax": lambda s: torch.softmax(s, 0),
    "log_softmax": lambda s: torch.log_softmax(s * 2, -1), "any": lambda s: (s > 0).any(0),
}


@pytest.mark.parametrize("name", list(ZERO_DIM))
def test_reductions_of_a_zero_dim_tensor(name):
    compile_small(ZERO_DIM[name], [rand((), torch.float32)])


def test_training_through_reductions_of_an_empty_tensor():
    """Rows of zero elements beside a reduction kernel (a softmax's max over a narrowed-away batch):
    placement meets a dim of size 0, and the step's output and gradient are empty as eager's."""
    from autofuse.api import Recorder
    from tests.randgraph_train import compare_training

    def program(a):
        v = F.leaky_relu(a.narrow(0, 0, 0), 0.1)
        return v.amax(1, keepdim=True) + torch.arange(1, device=a.device), torch.exp(v - v.amax(1, keepdim=True))

    compare_training(program, [rand((36, 23))], Recorder())


@pytest.mark.parametrize("dtype", FLOATS)
def test_variance_over_one_element_is_written_out(dtype):
    """var / std with correction 1 over one element: NaN, written so, not computed as (x - x)^2 / 0
    (on an H100 the compile contracted x * r - (x * r) * 1 into an FMA, the variance read +inf).
    The argmax over the NaN column is its first element."""
    x = rand((19, 1), dtype)
    x[3] = float("nan")
    fn = lambda x: (x.var(-1, keepdim=True), x.std(-1), (x - x.var(-1, keepdim=True)).argmax(0))  # noqa: E731
    compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
    for got, want in zip(compiled(x), fn(x)):
        assert_close(got, want)
    body = [line for k in kernels_of(compiled) for line in k.source.splitlines() if line.strip().startswith("tmp")]
    assert not any(" / " in line or '* float("inf")' in line for line in body)
