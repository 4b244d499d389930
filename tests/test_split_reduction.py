"""Split reductions (LaunchConfig.split): each reduction kernel of a default plan is given split=S
and compared with eager on poisoned buffers — column and row reductions, every splittable type,
looped and persistent variants, S with non-power-of-two and empty chunks; ineligible kernels are
rejected with a reason; the config's JSON and the GPU heuristics' choice."""
from dataclasses import replace

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.compiler import compile_graph
from autofuse.plan.plan import FusionPlan, KernelPlan, PlanError
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, kernels_of, rand


def split_plan(fn, args, split, **config):
    """The default plan with split=S (and `config` overrides) on every reduction kernel."""
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    kernels = tuple(replace(kp, config=replace(kp.config, split=split, **config)) if info.kind == "reduction" else kp
                    for kp, info in zip(art.plan.kernels, art.kernels))
    assert any(info.kind == "reduction" for info in art.kernels)
    return replace(art.plan, kernels=kernels)


def check_split(fn, args, split, **config):
    """Compile with the split plan on poisoned buffers (an unwritten output element fails) and compare."""
    plan = split_plan(fn, args, split, **config)
    compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    expected = fn(*args)
    for _ in range(2):  # the second call reuses the workspaces and counters the first one left
        actual = compiled(*args)
        assert_close(actual if isinstance(expected, (list, tuple)) else actual[0], expected)
    reductions = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    assert reductions and all(k.config.split == split for k in reductions)
    if split > 1:
        assert all("split_ticket" in k.source and "rsplit_id" in k.source for k in reductions)
        launches = [s for s in program_of(compiled).steps if getattr(s, "split", 1) > 1]
        assert launches and all(int(s._extra[-1].abs().sum()) == 0 for s in launches)  # counters back at 0
    return compiled


def program_of(compiled):
    (prog,) = compiled.compiled.programs.values()
    return prog


def colsum(x):
    return x.sum(0)


LOOPED = dict(persistent=False, XBLOCK=8, RBLOCK=64)


@pytest.mark.parametrize("split", [2, 3, 7, 64])
def test_column_sum_looped(split):
    # rnumel 1000: chunks of 512 / 384 / 192 / 64 rows; split=64 leaves the last chunks empty
    check_split(colsum, [rand((1000, 37))], split, **LOOPED)


def test_split_larger_than_the_chunks():
    # one RBLOCK covers rnumel: chunk = RBLOCK, programs s >= 1 reduce nothing and write the identity
    x = rand((100, 37))
    for fn in (colsum, lambda x: x.amax(0), lambda x: x.amin(0), lambda x: x.prod(0)):
        check_split(fn, [x], 5, persistent=False, XBLOCK=8, RBLOCK=128)


@pytest.mark.parametrize("split", [2, 3])
def test_column_max_min_with_nan(split):
    x = rand((700, 21))
    x[123, 4] = float("nan")
    x[650, 7] = float("nan")
    check_split(lambda x: (x.amax(0), x.amin(1 - 1)), [x], split, **LOOPED)


def test_row_sum_few_rows():
    check_split(lambda x: x.sum(1), [rand((8, 1 << 16))], 7, persistent=False, XBLOCK=1, RBLOCK=2048)


def test_prologue_fused_reduction_and_stored_prologue():
    x = rand((513, 40))
    check_split(lambda x: (x * 2 + 1).sum(0), [x], 3, **LOOPED)
    # the prologue is also an output: each chunk stores its own rows of it
    check_split(lambda x: ((x * 2 + 1), (x * 2 + 1).sum(0)), [x], 3, **LOOPED)


def test_any_all_bool():
    x = rand((300, 33)) > 2.5  # sparse Trues: some columns have none
    check_split(lambda x: (x.any(0), x.all(0)), [x], 3, **LOOPED)
    check_split(lambda x: (x > -2.9).all(1), [rand((6, 3000))], 2, persistent=False, XBLOCK=1, RBLOCK=256)


def test_int_sum_and_prod():
    x = rand((400, 19), torch.int32)
    check_split(lambda x: x.sum(0), [x], 7, **LOOPED)
    check_split(lambda x: x.sum(1), [rand((5, 999), torch.int64)], 3, persistent=False, XBLOCK=2, RBLOCK=128)
    check_split(lambda x: (x / 4 + 1).prod(0), [rand((90, 10), low=0.5, high=2.0)], 3, **LOOPED)


def test_non_contiguous_and_non_power_of_two():
    x = rand((1001, 37), noncontig=True)  # a transposed view: the column sum reads its rows contiguously
    assert not x.is_contiguous()
    check_split(colsum, [x], 3, **LOOPED)
    check_split(lambda x: x.sum(1), [rand((7, 1003), noncontig=True)], 2, persistent=False, XBLOCK=4, RBLOCK=128)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    check_split(lambda x: x.sum(0), [rand((600, 24), dtype)], 3, **LOOPED)
    check_split(lambda x: x.amax(1), [rand((4, 3000), dtype)], 7, persistent=False, XBLOCK=2, RBLOCK=256)


def test_several_reductions_one_kernel():
    x = rand((500, 30))
    compiled = check_split(lambda x: (x.sum(0), x.amax(0), (x * x).sum(0)), [x], 3, **LOOPED)
    red = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    assert len(red) == 1 and len(red[0].writes) == 3


def test_epilogue_runs_in_the_last_program():
    # x-loop nodes after the reduction (a mean's division, a bias read from memory, a cast) see the
    # combined value: they run in the block of the x block's last program, after the partials
    x, w = rand((700, 24), torch.bfloat16), rand((24,), torch.bfloat16)
    compiled = check_split(lambda x, w: (x.mean(0) * w + 1, x.sum(0)), [x, w], 3, **LOOPED)
    red = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    assert len(red) == 1
    body = red[0].source.split(f"def {red[0].fn_name}(")[1]
    assert body.count("@triton.jit") == 0  # one kernel: no second (combine) function
    partial, last = body.split("if split_ticket == 2:")
    assert "ws_ptr" in partial and "tl.atomic_add(split_counter" in partial
    assert "tl.load(in_ptr1" in last and "_to_bf16" in last  # the bias and the cast, after combining
    assert "tl.load(in_ptr1" not in partial
    assert last.rstrip().endswith("tl.store(split_counter + tl.program_id(0), 0)")


def test_many_calls_reuse_the_counters():
    # the counters are per launch site and reset by the last program: 5 calls, all exact
    x = rand((1000, 37))
    compiled = check_split(colsum, [x], 7, **LOOPED)
    for _ in range(3):
        y = rand((1000, 37))
        assert_close(compiled(y)[0], y.sum(0))


@pytest.mark.parametrize("split", [2, 3, 8])
def test_persistent_split(split):
    # persistent: each program's chunk fits one RBLOCK, RBLOCK >= ceil(rnumel / split)
    rnumel = 1000
    rblock = 1 << (-(-rnumel // split) - 1).bit_length()
    check_split(colsum, [rand((rnumel, 13))], split, persistent=True, XBLOCK=4, RBLOCK=rblock)
    check_split(lambda x: x.amax(1), [rand((3, rnumel))], split, persistent=True, XBLOCK=1, RBLOCK=rblock)


def test_ineligible_kernels_rejected_with_reasons():
    x = rand((16, 64))

    def compile_with(fn, plan):
        return compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, plan=plan))(x)  # compiles on call

    softmax = lambda x: torch.softmax(x, -1)  # noqa: E731
    with pytest.raises(PlanError, match="reads the reduction .* inside the r loop"):
        compile_with(softmax, split_plan(softmax, [x], 2))
    argmax = lambda x: x.argmax(0)  # noqa: E731
    with pytest.raises(PlanError, match="argmax, which does not combine"):
        compile_with(argmax, split_plan(argmax, [x], 2))
    with pytest.raises(PlanError, match="each chunk must fit one RBLOCK"):
        compile_with(colsum, split_plan(colsum, [x], 4, persistent=True, RBLOCK=2))  # 4 chunks of 2 < 16 rows
    relu = lambda x: torch.relu(x)  # noqa: E731
    art = compile_graph(trace_aten(relu, [x]), [x], CompileOptions(strict=True, use_db=False))
    bad = replace(art.plan, kernels=tuple(replace(k, config=replace(k.config, split=2)) for k in art.plan.kernels))
    with pytest.raises(PlanError, match="needs a reduction kernel"):
        compile_with(relu, bad)


def test_config_json_and_str():
    cfg = LaunchConfig(XBLOCK=8, RBLOCK=64, persistent=False, split=16)
    kp = KernelPlan(("a",), cfg)
    assert KernelPlan.from_json(kp.to_json()) == kp
    assert "split=16" in str(cfg) and "split" not in str(replace(cfg, split=1))
    old = {"XBLOCK": 8, "RBLOCK": 64, "num_warps": 4, "num_stages": 1, "persistent": False}  # before split existed
    assert KernelPlan.from_json({"nodes": ["a"], "config": old}).config == replace(cfg, split=1)
    assert replace(cfg, split=1).to_json() == old
    plan = split_plan(colsum, [rand((64, 8))], 4, **LOOPED)
    assert FusionPlan.loads(plan.dumps()) == plan


def test_default_heuristics_split_on_gpu_only():
    h = Heuristics()
    col = h.launch_config("reduction", 4096, 16384, False, True, legal={"split": True})
    assert col.split > 1 and -(-4096 // col.XBLOCK) * col.split >= 2 * 132
    row = h.launch_config("reduction", 8, 1 << 20, False, False, legal={"split": True})
    assert row.split > 1
    assert h.launch_config("reduction", 4096, 16384, False, True, legal={"split": False}).split == 1
    assert h.launch_config("reduction", 4096, 16384, True, True, legal={"split": True}).split == 1  # interpreter
    assert h.launch_config("reduction", 32768, 4096, False, False, legal={"split": True}).split == 1  # big x grid
    assert h.launch_config("reduction", 8, 1024, False, False, legal={"split": True}).split == 1  # short rows
    # a small reduction (cross-entropy's mean over 8192 rows): one program
    assert h.launch_config("reduction", 1, 8192, False, False, legal={"split": True}).split == 1
    assert h.launch_config("reduction", 1, 1 << 20, False, False, legal={"split": True}).split > 1
    # on the CPU the default plan never splits; softmax is not splittable even on the GPU heuristics' terms
    art = compile_graph(trace_aten(colsum, [rand((64, 8))]), [rand((64, 8))], CompileOptions(strict=True, use_db=False))
    assert all(k.config is None or k.config.split == 1 for k in art.plan.kernels)


def test_x_loop_prologue_feeding_the_r_loop():
    # a per-row value (x loop, before the reduction; long enough to be realized) read inside the r
    # loop and also an output: computed once before the r loop, stored by the last program
    def fn(x, b):
        s = b
        for _ in range(20):
            s = s * 1.01 + 0.1
        return s, (x * s[:, None]).sum(1)
    compiled = check_split(fn, [rand((6, 2000)), rand((6,))], 3, persistent=False, XBLOCK=2, RBLOCK=256)
    (red,) = kernels_of(compiled)
    partial = red.source.split(f"def {red.fn_name}(")[1].split("if split_ticket")[0]
    assert partial.index("tl.load(in_ptr0 + (xindex)") < partial.index("for roffset")


@pytest.mark.gpu
@pytest.mark.parametrize("split,xblock,rblock,warps", [(16, 128, 64, 8), (64, 64, 32, 4), (7, 32, 16, 4)])
def test_full_size_split_on_the_gpu(split, xblock, rblock, warps):
    # the ticket's ordering (partials visible to the last program) shows only with thousands of
    # programs racing on a real GPU: the benchmark's column sum, a fresh input per call
    x = rand((16384, 4096))
    plan = split_plan(colsum, [x], split, persistent=False, XBLOCK=xblock, RBLOCK=rblock, num_warps=warps)
    compiled = compile_traced(colsum, [x], CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    for i in range(20):
        y = x if i == 0 else rand((16384, 4096))
        torch.testing.assert_close(compiled(y)[0], y.double().sum(0).float(), rtol=1e-4, atol=1e-3)
    # a row mean with an epilogue, 8 rows of 1M: 8 x blocks of `split` programs each
    z, w = rand((8, 1 << 20)), rand((8,))
    fn = lambda z, w: z.mean(1) * w + 1  # noqa: E731
    compiled = check_split(fn, [z, w], split, persistent=False, XBLOCK=1, RBLOCK=1024, num_warps=warps)
    for _ in range(5):
        z = rand((8, 1 << 20))
        assert_close(compiled(z, w)[0], fn(z, w))


def test_a_column_sum_over_few_columns_splits_from_shorter_columns():
    """A weight gradient's column sum (2048 tokens x 2048 features) runs 32 x blocks of 64 columns:
    without a split most SMs idle; a row reduction of the same size keeps its one-row programs."""
    h = Heuristics()
    outer = h.launch_config("reduction", 2048, 2048, False, outer=True, legal={"split": True})
    assert outer.split > 1 and 2048 // outer.split >= h.split_outer_min_chunk
    assert h.launch_config("reduction", 2048, 2048, False, outer=False, legal={"split": True}).split == 1
    assert h.launch_config("reduction", 2048, 512, False, outer=True, legal={"split": True}).split == 1


def test_batchnorm_statistics_over_few_channels_fill_the_gpu():
    """BatchNorm's per-channel sums in a channels-last training step (ResNet-50 at batch 32: 512
    channels of 32 x 7 x 7, 1024 of 32 x 14 x 14, 64 of 32 x 112 x 112): 32 columns per program, and
    a split into chunks of at least `split_outer_min_chunk` rows that brings the grid near the split
    target, small reductions included."""
    h = Heuristics()
    for channels, rows in ((512, 1568), (1024, 6272), (2048, 1568), (64, 401408)):
        cfg = h.launch_config("reduction", channels, rows, False, outer=True, legal={"split": True})
        assert (cfg.XBLOCK, cfg.RBLOCK, cfg.num_warps) == (32, 32, 4)
        programs = -(-channels // cfg.XBLOCK) * cfg.split
        assert programs >= 2 * 132 and rows // cfg.split >= h.split_outer_min_chunk, (channels, rows, cfg)
    wide = h.launch_config("reduction", 4096, 16384, False, outer=True, legal={"split": True})
    assert (wide.XBLOCK, wide.RBLOCK, wide.split) == (64, 16, 16)   # the column sum's measured best


# ---- argmax / argmin over few long rows: chunks, then the chunk holding the extremum -------------------
def test_a_long_whole_tensor_argmax_runs_in_chunks():
    """argmax over 2^17 + 7 elements: each chunk's max and position in one kernel, the chunk of the
    max and the position inside it in a second, not one program over the whole tensor."""
    from autofuse.lower.reductions import SPLIT_ARG_CHUNK, SPLIT_ARG_MIN_LENGTH
    x = rand((SPLIT_ARG_MIN_LENGTH + 7,))
    compiled = compile_traced(lambda x: x.argmax(), [x], CompileOptions(strict=True, use_db=False, poison=True))
    assert torch.equal(compiled(x)[0], x.argmax())
    kernels = kernels_of(compiled)
    assert [k.kind for k in kernels] == ["reduction", "reduction"], [(k.kind, k.rnumel) for k in kernels]
    assert kernels[0].rnumel == SPLIT_ARG_CHUNK


def _nans(x):
    x = x.clone()
    x[1, 100, 2] = float("nan")
    x[1, 150, 2] = float("nan")
    return x


SPLIT_ARGS = {
    "argmax-middle": (lambda x: x.argmax(1), lambda: rand((3, 203, 5))),
    "argmin-keepdim": (lambda x: x.argmin(1, keepdim=True), lambda: rand((3, 203, 5))),
    "argmax-transposed": (lambda x: x.transpose(0, 2).argmax(1) * 2 + 1, lambda: rand((3, 203, 5))),
    "argmax-nan": (lambda x: x.argmax(1), lambda: _nans(rand((3, 203, 5)))),
    "argmin-nan": (lambda x: x.argmin(1), lambda: _nans(rand((3, 203, 5)))),
    "argmax-int-ties": (lambda x: x.argmax(1), lambda: torch.randint(-3, 3, (3, 203, 5), dtype=torch.int32)),
    "argmin-int-ties": (lambda x: x.argmin(1), lambda: torch.randint(-3, 3, (3, 203, 5), dtype=torch.int32)),
    "argmax-bf16": (lambda x: x.argmax(1), lambda: rand((3, 203, 5), torch.bfloat16)),
    "argmax-whole": (lambda x: x.argmax(), lambda: rand((3, 203, 5))),
    "argmin-whole-keepdim": (lambda x: x.argmin(keepdim=True), lambda: torch.randint(-3, 3, (3, 203, 5))),
    "all-minus-inf": (lambda x: x.argmax(1), lambda: torch.full((2, 100), float("-inf"))),
    "whole-chunks": (lambda x: x[:, :192].argmax(1), lambda: rand((3, 203, 5))),
    "max-with-indices-nan": (lambda x: tuple(x.max(1)), lambda: _nans(rand((3, 203, 5)))),
    "min-with-indices-keepdim": (lambda x: tuple(torch.min(x, 1, keepdim=True)),
                                 lambda: torch.randint(-3, 3, (3, 203, 5), dtype=torch.int32)),
}


@pytest.mark.parametrize("case", list(SPLIT_ARGS))
def test_split_arg_reductions_equal_eager(monkeypatch, case):
    """Rows of 203 (192: whole chunks) in chunks of 16: ties go to the first position, a NaN is the
    extremum, padding is never picked; max / min with indices take their values from the chunks."""
    import autofuse.lower.reductions as reductions
    monkeypatch.setattr(reductions, "SPLIT_ARG_MIN_LENGTH", 64)
    monkeypatch.setattr(reductions, "SPLIT_ARG_CHUNK", 16)
    fn, make = SPLIT_ARGS[case]
    x = make()
    compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
    expected = fn(x)
    actual = compiled(x)
    assert_close(actual if isinstance(expected, tuple) else actual[0], expected)
    kernels = kernels_of(compiled)
    assert any(k.rnumel == 16 for k in kernels) and all(k.kind != "fallback" for k in kernels)


def test_argmax_over_many_rows_is_not_split(monkeypatch):
    import autofuse.lower.reductions as reductions
    monkeypatch.setattr(reductions, "SPLIT_ARG_MIN_LENGTH", 64)
    x = rand((reductions.SPLIT_ARG_MAX_ROWS + 1, 100))
    compiled = compile_traced(lambda x: x.argmax(1), [x], CompileOptions(strict=True, use_db=False, poison=True))
    assert torch.equal(compiled(x)[0], x.argmax(1))
    assert len(kernels_of(compiled)) == 1
