"""Scans (cumsum, cumprod, logcumsumexp, cummax/cummin values) as generated tl.associative_scan
kernels: compared with eager on random inputs over every dim, reversed, exclusive, masked, every
dtype, non-power-of-two rows, transposed inputs, with prologues and epilogues fused; persistent and
looped (a looped row forced through the plan's config); configs, plans, explain and cost-model
features of scan kernels."""
from dataclasses import replace
import warnings

import pytest
import torch
import torch.nn.functional as F

import autofuse
from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.compiler import compile_graph, schedule
from autofuse.plan.plan import PlanError
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, kernels_of, rand

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)
# a prefix sum of ±3 values that crosses zero keeps the absolute rounding error of the adds before
# it (their order differs from eager's): relative tolerance alone fails near zero
F32_SCAN_ATOL = 1e-4


def scan_kernels(compiled):
    return [k for k in kernels_of(compiled) if k.kind == "scan"]


def check(fn, args, *, kernels=None, plan=None, atol=None, rtol=None, reference=None):
    """Compile strictly on poisoned buffers, compare with eager (or `reference`), assert nothing ran
    as a fallback and a scan kernel ran; `kernels`: the expected number of generated kernels.
    Returns the KernelInfos."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_traced(fn, args, OPTIONS if plan is None else OPTIONS.with_(plan=plan))
        actual = compiled(*args)
    expected = (reference or fn)(*args)
    first = expected[0] if isinstance(expected, (list, tuple)) else expected
    if atol is None and first.dtype == torch.float32:
        atol = F32_SCAN_ATOL
    assert_close(actual if isinstance(expected, (list, tuple)) else actual[0], expected, atol=atol, rtol=rtol)
    infos = kernels_of(compiled)
    assert not [k for k in infos if k.kind == "fallback"], [k.aten_ops for k in infos]
    scans = [k for k in infos if k.kind == "scan"]
    assert scans and all("tl.associative_scan" in k.source for k in scans)
    if kernels is not None:
        assert len(infos) == kernels, [(k.kind, k.aten_ops) for k in infos]
    return infos


def looped_plan(fn, args, **config):
    """The default plan with every scan kernel looped (RBLOCK below the row) and `config` overrides."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    cfg = dict(persistent=False, XBLOCK=2, RBLOCK=64) | config
    kernels = tuple(replace(kp, config=replace(kp.config, **cfg)) if info.kind == "scan" else kp
                    for kp, info in zip(art.plan.kernels, art.kernels))
    assert any(info.kind == "scan" for info in art.kernels)
    return replace(art.plan, kernels=kernels)


def check_both(fn, args, **kw):
    """Persistent (the default for these sizes on the CPU) and looped over 64-element chunks."""
    infos = check(fn, args, **kw)
    if all(a.device.type == "cpu" for a in args if isinstance(a, torch.Tensor)):  # the GPU's defaults differ
        assert all(k.config.persistent for k in infos if k.kind == "scan")
    looped = check(fn, args, plan=looped_plan(fn, args), **kw)
    assert all(not k.config.persistent and k.config.RBLOCK == 64 for k in looped if k.kind == "scan")
    assert all("carry_" in k.source for k in looped if k.kind == "scan")


@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_cumsum_every_dim(dim):
    check_both(lambda x: torch.cumsum(x, dim), [rand((3, 130, 7))], kernels=1)


def test_cumsum_transposed_input():
    # the scanned dim is strided in memory; the rows are not contiguous either
    check_both(lambda x: x.cumsum(-1), [rand((9, 200), noncontig=True)], kernels=1)
    check_both(lambda x: x.cumsum(0), [rand((200, 9), noncontig=True)], kernels=1)


def test_reversed_cumsum_is_one_kernel():
    fn = lambda x: x.flip(-1).cumsum(-1).flip(-1)  # noqa: E731
    check_both(fn, [rand((5, 201))], kernels=1)
    check_both(lambda x: x.flip(1).cumsum(1).flip(1), [rand((4, 150, 3))])


def test_scan_of_a_flip_not_flipped_back():
    # the flip is the forward scan's prologue: one kernel, no reverse
    infos = check(lambda x: torch.logcumsumexp(x.flip(-1), -1), [rand((3, 77))], kernels=1)
    assert "reverse=True" not in infos[0].source


def test_exclusive_cumsum():
    x = rand((6, 333))
    check_both(lambda x: x.cumsum(-1) - x, [x], kernels=1)
    # the shifted form reads the scan one position back: a scan kernel, then a pointwise pad
    check_both(lambda x: F.pad(x.cumsum(-1)[..., :-1], (1, 0)), [x], kernels=2)


def test_masked_cumsum():
    x, mask = rand((4, 300)), rand((4, 300), torch.bool)
    check_both(lambda x, m: (x * m).cumsum(-1), [x, mask], kernels=1)
    check_both(lambda x, m: torch.where(m, x, 0.0).cumsum(-1), [x, mask], kernels=1)


def test_running_mean_epilogue():
    def running_mean(x):
        n = torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=x.dtype)
        return x.cumsum(-1) / n
    check_both(running_mean, [rand((5, 1000))], kernels=1)


def test_scan_of_a_scan_and_of_a_reduction():
    x = rand((5, 300))
    check_both(lambda x: x.cumsum(-1).cumsum(-1) * 0.01, [x], kernels=1)   # both carries in one loop
    # the row mean is a reduction kernel; the scan kernel reads it once per row
    check_both(lambda x: (x - x.mean(-1, keepdim=True)).cumsum(-1), [x], kernels=2)


def test_cumprod_and_logcumsumexp():
    x = rand((4, 129), low=0.8, high=1.25)
    check_both(lambda x: torch.cumprod(x, -1), [x], kernels=1)
    check_both(lambda x: torch.cumprod(x, 0), [rand((90, 5), low=0.8, high=1.25)], kernels=1)
    y = rand((4, 257))
    y[1, :70] = float("-inf")   # a leading run of -inf stays -inf, then the row recovers
    y[2, 100] = float("inf")
    check_both(lambda y: torch.logcumsumexp(y, -1), [y], kernels=1)
    check_both(lambda y: torch.logcumsumexp(y, 0), [rand((200, 3))], kernels=1)


def test_cummax_cummin_values():
    x = rand((4, 150))
    x[1, 40] = float("nan")   # NaN propagates from its position on, as in eager
    check_both(lambda x: torch.cummax(x, -1)[0], [x], kernels=1)
    # an epilogue of a scan over a leading dim joins the scan with its loops reordered
    check_both(lambda x: torch.cummin(x, 0)[0] * 2, [rand((99, 3))], kernels=1)
    check_both(lambda x: torch.cummax(x, -1)[0], [rand((3, 100), torch.int32)], kernels=1)


def test_cummax_cummin_indices():
    """Values and indices in one kernel, persistent and looped; a tie goes to the later element and
    each NaN is the max / min from its position on, as in eager."""
    x = rand((5, 150))
    x[1, 40] = x[1, 70] = float("nan")
    x[2] = x[2].round()                         # ties across the row and across 64-element chunks
    check_both(lambda x: torch.cummax(x, -1), [x], kernels=1)
    check_both(lambda x: torch.cummin(x * 2, 0), [rand((99, 3))], kernels=1)
    check_both(lambda x: torch.cummax(x, 1)[1], [torch.randint(-3, 3, (3, 100, 2), dtype=torch.int32)], kernels=1)
    b = (rand((7, 130)) * 3).round().to(torch.bfloat16)
    check_both(lambda x: torch.cummin(x, -1), [b], kernels=1)


def test_cummax_indices_of_a_size_one_dim_are_zero():
    fn = lambda x: torch.cummax(x + 1, 1)[1] + 1  # noqa: E731
    x = rand((6, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_traced(fn, [x], OPTIONS)
        actual = compiled(x)
    assert_close(actual[0], fn(x))
    assert [k.kind for k in kernels_of(compiled)] == ["pointwise"]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.uint8])
def test_integer_cumsum_promotes_to_int64(dtype):
    x = rand((3, 301), dtype)
    assert torch.cumsum(x, -1).dtype == torch.int64
    check_both(lambda x: torch.cumsum(x, -1), [x], kernels=1)
    check_both(lambda x: torch.cumprod(x, 0), [rand((20, 7), dtype, low=0, high=0)], kernels=1)


def test_cumsum_dtype_argument():
    check_both(lambda x: torch.cumsum(x, -1, dtype=torch.float64), [rand((3, 100))], kernels=1)
    check_both(lambda x: torch.cumsum(x, -1, dtype=torch.float32), [rand((3, 100), torch.int32)], kernels=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_f32(dtype):
    x = rand((4, 1000), dtype, low=0.0, high=1.0)
    infos = check(lambda x: x.cumsum(-1), [x], kernels=1)
    assert "tl.float32" in infos[0].source and "tl.associative_scan" in infos[0].source
    # against an f32 reference rounded once: eager's CPU half cumsum rounds the same way
    if x.device.type == "cpu":
        ref = x.float().cumsum(-1).to(dtype)
        assert torch.equal(ref, x.cumsum(-1)) or torch.allclose(ref.float(), x.cumsum(-1).float(), rtol=1e-2)
    check(lambda x: torch.logcumsumexp(x, -1) + 1, [rand((4, 300), dtype)], kernels=1)


@pytest.mark.parametrize("n", [1000, 3001])
def test_non_power_of_two_rows(n):
    check_both(lambda x: x.cumsum(-1), [rand((3, n))], kernels=1)


def test_long_row_loops_by_default():
    # 40000 elements: above the interpreter's persistent row, so the default config loops
    infos = check(lambda x: x.cumsum(-1) * 0.5, [rand((2, 40000), low=0.0, high=1.0)], kernels=1, rtol=1e-4, atol=1e-3)
    assert not infos[0].config.persistent and infos[0].config.RBLOCK < 40000


def test_a_long_one_dimensional_scan_is_split_into_chunks():
    """A cumsum over 2^17 + 5 elements: chunk scans, a scan of their totals, and the combine fused
    with its epilogue (three kernels), not one program stepping through the whole row."""
    from autofuse.lower.scans import SPLIT_CHUNK, SPLIT_MIN_LENGTH
    x = rand((SPLIT_MIN_LENGTH + 5,), low=0.0, high=1.0)
    infos = check(lambda x: x.cumsum(0) * 0.5, [x], kernels=3, rtol=1e-4, atol=1e-3)
    assert [k.kind for k in infos] == ["scan", "scan", "pointwise"]
    assert infos[0].rnumel == SPLIT_CHUNK


SPLIT_SCANS = {
    "cumsum": lambda x: x.cumsum(1),
    "cumsum-transposed": lambda x: x.transpose(0, 2).cumsum(1) + 1,
    "cumprod": lambda x: (1 + 0.01 * x).cumprod(1),
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "cummax-values": lambda x: torch.cummax(x, 1).values * 3,
    "cummin-with-indices": lambda x: torch.cummin(x, -2),
    "int-cumsum": lambda x: (x * 10).int().cumsum(1),
    "bf16-cumsum": lambda x: x.bfloat16().cumsum(1),
    "whole-chunks": lambda x: x[:, :192].cumsum(1),
    "reversed": lambda x: x.flip(1).cumsum(1).flip(1) * 2,
}


@pytest.mark.parametrize("case", list(SPLIT_SCANS))
def test_split_scans_equal_eager(monkeypatch, case):
    """Rows of 203 (and 192: whole chunks) cut into chunks of 16, over a middle dim, every combine,
    integer and bf16 accumulation, a NaN in the row."""
    import autofuse.lower.scans as scans
    monkeypatch.setattr(scans, "SPLIT_MIN_LENGTH", 64)
    monkeypatch.setattr(scans, "SPLIT_CHUNK", 16)
    x = rand((3, 203, 5))
    if case in ("cummax-values", "logcumsumexp"):
        x[1, 40, 2] = float("nan")
    bf16 = case.startswith("bf16")
    # CUDA's eager cumsum over a middle dim adds in bf16, ours in f32 as on the CPU, of the values the
    # conversion to bf16 leaves unrounded inside the kernel (docs/design.md, "Half precision"): an f32
    # cumsum rounded once is the reference
    infos = check(SPLIT_SCANS[case], [x], atol=2e-2 if bf16 else None, rtol=2e-2 if bf16 else None,
                  reference=(lambda x: x.cumsum(1).bfloat16()) if bf16 else None)
    assert any(k.kind == "scan" and k.rnumel == 16 for k in infos), [(k.kind, k.rnumel) for k in infos]


def test_many_rows_are_not_split(monkeypatch):
    import autofuse.lower.scans as scans
    monkeypatch.setattr(scans, "SPLIT_MIN_LENGTH", 64)
    check(lambda x: x.cumsum(1), [rand((scans.SPLIT_MAX_ROWS + 1, 100))], kernels=1)


@pytest.mark.parametrize("rblock,xblock", [(16, 1), (64, 4), (128, 8)])
def test_looped_configs(rblock, xblock):
    fn = lambda x: (x.cumsum(-1), x.flip(-1).cumsum(-1).flip(-1))  # noqa: E731
    x = rand((7, 1001))
    plan = looped_plan(fn, [x], RBLOCK=rblock, XBLOCK=xblock)
    check(fn, [x], plan=plan)


def test_scan_and_size_one_dims():
    check(lambda x: x.cumsum(1) + 1, [rand((1, 300, 1))], kernels=1)
    # a scan over a dim of one element is its input: no scan kernel, still correct
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = rand((5, 1))
        compiled = compile_traced(lambda x: x.cumsum(1), [x], OPTIONS)
        assert_close(compiled(x)[0], x.cumsum(1))
    assert [k.kind for k in kernels_of(compiled)] == ["pointwise"]


def test_scans_do_not_share_a_kernel_with_reductions_or_opposite_scans():
    x = rand((6, 300))
    infos = check(lambda x: (x.cumsum(-1), x.sum(-1), x.cumsum(-1).amax(-1)), [x])
    assert all(k.kind in ("scan", "reduction") for k in infos)
    infos = check(lambda x: x.cumsum(-1) + x.flip(-1).cumsum(-1).flip(-1), [x])
    assert len([k for k in infos if k.kind == "scan"]) == 2


def test_tvm_and_unfused_strategies():
    fn = lambda x, m: (x * m).cumsum(-1) / 3  # noqa: E731
    args = [rand((4, 130)), rand((4, 130), torch.bool)]
    for strategy in ("tvm", "none"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = compile_traced(fn, args, OPTIONS.with_(strategy=strategy))
            assert_close(compiled(*args)[0], fn(*args))
        assert any(k.kind == "scan" for k in kernels_of(compiled))


def test_default_configs_follow_inductor():
    h = Heuristics()
    scan, red = h.launch_config("scan", 64, 1000, False), h.launch_config("reduction", 64, 1000, False)
    assert scan.persistent and red.persistent and scan.RBLOCK == red.RBLOCK == 1024
    assert scan.XBLOCK == 1   # one row per program: a scan's combine tree spans the whole row
    long = h.launch_config("scan", 8, 40000, False, legal={"split": True, "online": True, "cache_hints": True})
    assert long == LaunchConfig(XBLOCK=1, RBLOCK=2048, num_warps=8, persistent=False)
    assert not h.launch_config("scan", 8, 2000, False).persistent   # reductions stay persistent to 1024 too
    assert not Heuristics(scan_persistent_max=256).launch_config("scan", 64, 1000, False).persistent
    assert h.launch_config("scan", 4096, 512, False, outer=True).XBLOCK == 64  # strided rows: lanes along x


def test_plan_rejects_reduction_only_options_on_scans():
    fn = lambda x: x.cumsum(-1)  # noqa: E731
    x = rand((4, 5000))
    for bad, why in ((dict(split=4), "a scan kernel does not split"), (dict(cache_hints=True), "a scan kernel takes no"),
                     (dict(online=True), "online softmax is impossible")):
        with pytest.raises(PlanError, match=why):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile_traced(fn, [x], OPTIONS.with_(plan=looped_plan(fn, [x], **bad)))(x)  # compiles on call


def test_search_candidates_are_legal():
    from autofuse.plan.apply import check_config
    from autofuse.search.candidates import candidate_configs, neighbour_configs
    fn = lambda x: x.cumsum(-1) * 2  # noqa: E731
    args = [rand((64, 3000))]
    (group,) = schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups
    default = Heuristics().launch_config("scan", group.numel, group.rnumel, False)
    cands = candidate_configs(group, default, interpret=False, limit=200)
    assert {c.persistent for c in cands} == {True, False}
    assert all(check_config(c, group) is None and c.split == 1 and not c.cache_hints for c in cands)
    assert all(check_config(c, group) is None for c in neighbour_configs(default, group))


def test_explain_shows_scan_kernels():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x.relu(), 1) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = autofuse.explain(M(), (rand((4, 100)),), use_db=False)
    (k,) = report.kernels
    assert k.kind == "scan" and "cumsum" in k.aten_ops and "relu" in k.aten_ops
    assert "[scan]" in str(report)


def test_cost_model_features_of_a_scan_kernel():
    from costmodel.features import FEATURE_NAMES, kernel_features
    from tests.test_costmodel import _record
    for cfg in (None, {"XBLOCK": 1, "RBLOCK": 512, "num_warps": 8, "num_stages": 1, "persistent": False}):
        rec = _record(lambda x: x.cumsum(-1) * 2, [torch.randn(64, 3000)], cfg)
        assert rec["kind"] == "scan"
        f = kernel_features(rec, compile=False)
        assert set(f) == set(FEATURE_NAMES) and f["is_reduction"] == 1.0
        assert f["reductions"] >= 1
        assert f["looped"] == float(cfg is not None)
