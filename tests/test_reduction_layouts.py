"""Reductions laid out for the memory they read: variance in one pass (sibling sums of x minus the
row's first element), r-invariant loads issued once before an r loop, online softmax over strided
rows without chunks, x-invariant loads (a norm's weight) issued as one row per block, outer reductions persistent up to 64 r elements, one NaN-propagating reduce
for a float max/min on the GPU and argmax/argmin in two reduces. Every output is compared with
eager (random values, non-power-of-two sizes, transposed inputs, f32 and bf16, NaN and inf) with
the defaults and with looped/persistent configs forced through a plan."""
import re
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.codegen.options import KernelView, default_legality
from autofuse.codegen.triton_kernel import KernelWriter
from autofuse.compiler import compile_graph, schedule
from autofuse.schedule.fusion import is_outer_reduction, lane_order
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, compile_and_compare, kernels_of, rand

TOL = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (4e-2, 4e-2)}


def compiled_sources(fn, args, heuristics=None, tol=None, **config):
    """Kernel sources of fn compiled with every reduction kernel's config replaced by `config`
    (through a plan), after checking the outputs against eager on poisoned buffers."""
    options = CompileOptions(strict=True, use_db=False, **({"heuristics": heuristics} if heuristics else {}))
    art = compile_graph(trace_aten(fn, args), args, options)
    if config:
        kernels = tuple(replace(kp, config=replace(kp.config, **config)) if info.kind == "reduction" else kp
                        for kp, info in zip(art.plan.kernels, art.kernels))
        options = replace(options, plan=replace(art.plan, kernels=kernels), poison=True)
    else:
        options = replace(options, poison=True)
    compiled = compile_traced(fn, args, options)
    expected, actual = fn(*args), compiled(*args)
    if not isinstance(expected, (list, tuple)):
        actual = actual[0]
    tol = tol or TOL.get(args[0].dtype, (1e-4, 1e-4))
    assert_close(actual, expected, rtol=tol[0], atol=tol[1])
    return [k.source for k in kernels_of(compiled) if k.kind != "fallback"]


def gpu_sources(fn, args):
    """(config, kernel source) of each kernel of fn as the GPU default would write it."""
    sched = schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    lowering, placed = sched.lowering, sched.placed
    out = []
    dtypes = {i.name: i.layout.dtype for i in lowering.inputs if i is not None}
    dtypes |= {b.name: b.layout.dtype for b in lowering.buffers if hasattr(b, "layout")}
    for g, _ in placed:
        if g.is_extern:
            continue
        legal = default_legality(KernelView.of(g), False)
        kind = "reduction" if g.is_reduction else "pointwise"
        cfg = Heuristics().launch_config(kind, g.numel, g.rnumel, False, is_outer_reduction(g), legal=legal)
        stored = {n.name for n in g.nodes}
        src = KernelWriter("k", g.placements(), g.numel, g.rnumel, g.is_reduction, stored, dtypes, {}, cfg,
                           False, lane_order(g)).generate().source
        out.append((cfg, src[src.rindex("@triton.jit"):]))
    return out


# ---- variance in one pass ---------------------------------------------------------------------------
VAR_CASES = {
    "var_middle": lambda x: x.var(1),
    "var_mean_outer2_keepdim": lambda x: torch.var_mean(x, (0, 2), keepdim=True),
    "var_mean_last_biased": lambda x: torch.var_mean(x, -1, correction=0),
    "var_all": lambda x: x.var(),
    "layer_norm_hw": lambda x: F.layer_norm(x, x.shape[-2:]),
    "group_norm": lambda x: F.group_norm(x.unsqueeze(0), 1),
    "instance_norm": lambda x: F.instance_norm(x.unsqueeze(0)),
    "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("noncontig", [False, True])
@pytest.mark.parametrize("case", sorted(VAR_CASES))
def test_variance_matches_eager(case, noncontig, dtype):
    x = rand((6, 13, 29), dtype, noncontig=noncontig)
    # batch_norm's output strides on a transposed input differ from eager's with either variance
    compile_and_compare(VAR_CASES[case], [x], atol=TOL[dtype][1], rtol=TOL[dtype][0],
                        check_stride=not (noncontig and case == "batch_norm_train"))


@pytest.mark.parametrize("offset,spread", [(1e3, 1.0), (-5e4, 100.0)])
def test_variance_of_rows_far_from_zero(offset, spread):
    """A mean far from 0 (|mean| >> std): the shift by the row's first element keeps the sums small.
    The tolerance is the inputs' own resolution (an ulp of the offset over the std) a few times."""
    x = rand((5, 3000), low=-spread, high=spread) + offset
    compile_and_compare(lambda x: torch.var_mean(x, -1), [x], rtol=1e-3, atol=1e-3)
    compiled_sources(lambda x: F.layer_norm(x, x.shape[-1:]), [x], tol=(1e-3, 1e-3), XBLOCK=2, RBLOCK=256,
                     persistent=False)


def test_variance_special_values():
    x = rand((4, 37))
    x[1, 5] = float("nan")
    x[2, 0] = float("inf")
    x[3, :] = 2.5   # a constant row: var 0, never below it
    compile_and_compare(lambda x: torch.var_mean(x, -1), [x])


def test_looped_layer_norm_reads_its_rows_twice():
    """The statistics' pass (both sums) and the output's: two r loops, the shift loaded before them."""
    x = rand((7, 1500), noncontig=True)   # past the persistent threshold: the default takes one pass
    (src,) = compiled_sources(lambda x: F.layer_norm(x, x.shape[-1:]), [x], XBLOCK=2, RBLOCK=256, persistent=False)
    assert src.count("for roffset") == 2
    head = src.split("for roffset")[0]
    assert head.count("tl.load(") == 1 and "xmask, other=0)" in head   # the shift, an [XBLOCK, 1] load


def test_variance_passes_by_row_length():
    """Rows that fit a persistent kernel take two passes over registers by default, longer rows the
    shifted single pass; either form stays available."""
    fn = lambda x: torch.var_mean(x, -1)  # noqa: E731
    short, long = rand((7, 600)), rand((7, 1500))
    (src,) = compiled_sources(fn, [short], XBLOCK=2, RBLOCK=64, persistent=False)
    assert src.count("for roffset") == 2
    (src,) = compiled_sources(fn, [short], Heuristics(variance="shifted"), XBLOCK=2, RBLOCK=64, persistent=False)
    assert src.count("for roffset") == 1
    (src,) = compiled_sources(fn, [long], XBLOCK=2, RBLOCK=256, persistent=False)
    assert src.count("for roffset") == 1
    (src,) = compiled_sources(fn, [long], Heuristics(variance="two_pass"), XBLOCK=2, RBLOCK=256, persistent=False)
    assert src.count("for roffset") == 2
    (src,) = compiled_sources(fn, [short])
    assert "for roffset" not in src and src.count("tl.reduce(") == 2

def test_variance_over_columns_takes_one_pass_where_its_kernel_loops():
    """A column variance is persistent only up to a few dozen rows: past them its looped kernel
    takes the shifted single pass, reading the input once."""
    x = rand((6, 300, 7))
    (src,) = compiled_sources(lambda x: x.var(1), [x], XBLOCK=8, RBLOCK=16, persistent=False)
    assert src.count("for roffset") == 1


def test_split_norm_statistics_run_in_one_kernel():
    """A column statistic the GPU default splits: both sums in one split kernel."""
    srcs = gpu_sources(lambda x: F.batch_norm(x, None, None, training=True), [rand((65536, 48))])
    reductions = [(c, s) for c, s in srcs if c.RBLOCK > 1]
    assert len(reductions) == 1 and reductions[0][0].split > 1
    assert reductions[0][1].count("tl.reduce(") >= 2
    compiled_sources(lambda x: F.batch_norm(x, None, None, training=True), [rand((1000, 48))],
                     Heuristics(reorder_loops=False, variance="shifted"), XBLOCK=16, RBLOCK=16, persistent=False,
                     split=4)


# ---- r-invariant loads before the loop ----------------------------------------------------------------
def test_row_value_loaded_once_before_the_loop():
    x, s = rand((9, 700)), rand((9, 1), low=0.5, high=2)
    (src,) = compiled_sources(lambda x, s: (x * s).sum(-1), [x, s], XBLOCK=4, RBLOCK=128, persistent=False)
    loop = src.split("for roffset")[1]
    assert "in_ptr1" not in loop and "in_ptr1" in src.split("for roffset")[0]


@pytest.mark.parametrize("persistent", [True, False])
def test_embedding_ids_loaded_once_per_row(persistent):
    """BERT's embeddings: the token and position ids do not vary along the row the layer norm
    reduces, so each is one [XBLOCK, 1] load per row (and its bounds fix-up runs per row), in a
    persistent block as before an r loop; the gathers that use them vary along r."""
    emb, pos, w, b = rand((53, 37)), rand((11, 37)), rand((37,)), rand((37,))
    ids = torch.randint(0, 53, (3, 11), device=emb.device)
    positions = torch.arange(11, device=emb.device).expand(3, 11)

    def fn(ids, positions, emb, pos, w, b):
        return F.layer_norm(F.embedding(ids, emb) + F.embedding(positions, pos), (37,), w, b)

    (src,) = compiled_sources(fn, [ids, positions, emb, pos, w, b], XBLOCK=2, RBLOCK=64 if persistent else 16,
                              persistent=persistent)
    loads = re.findall(r"tl\.load\((in_ptr\d+) \+ \((.*?)\), (\w+)", src)
    row_loads = [(ptr, mask) for ptr, offsets, mask in loads if "rindex" not in offsets]
    assert len({ptr for ptr, _ in row_loads}) == 2 and {mask for _, mask in row_loads} == {"xmask"}


def test_masked_row_value_stays_in_the_loop():
    x, s = rand((9, 700)), rand((9, 1))
    fn = lambda x, s: (x * F.pad(s, (0, 0, 0, 2))[:9]).sum(-1) + torch.where(x > 0, s, 0.0).amax(-1)  # noqa: E731
    compiled_sources(fn, [x, s], XBLOCK=4, RBLOCK=128, persistent=False)


# ---- softmax over strided rows -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_strided_rows(op, dim, dtype):
    x = rand((37, 45, 19), dtype)
    x[3, 4, 5] = float("-inf")
    fn = lambda x: getattr(torch, op)(x, dim)  # noqa: E731
    compile_and_compare(fn, [x], atol=TOL[dtype][1], rtol=TOL[dtype][0])
    srcs = compiled_sources(fn, [x], XBLOCK=16, RBLOCK=8, persistent=False, online=True)
    assert not any("tl.reshape" in s for s in srcs)   # per-element lanes: rows are strided


def test_online_softmax_over_contiguous_rows_keeps_chunks():
    x = rand((5, 1300))
    srcs = compiled_sources(lambda x: torch.softmax(x, -1), [x], XBLOCK=1, RBLOCK=512, num_warps=4, persistent=False,
                            online=True)
    assert any("tl.reshape" in s for s in srcs)


def test_outer_default_is_persistent_up_to_64_rows():
    h = Heuristics()
    cfg = h.launch_config("reduction", 1049600, 64, False, outer=True)
    assert (cfg.XBLOCK, cfg.RBLOCK, cfg.num_warps, cfg.persistent) == (32, 64, 8, True)
    cfg = h.launch_config("reduction", 4096, 23, False, outer=True)
    assert (cfg.XBLOCK, cfg.RBLOCK, cfg.persistent) == (128, 32, True)
    assert h.launch_config("reduction", 4096, 16, False, outer=True) == replace(cfg, XBLOCK=64, RBLOCK=16,
                                                                                   num_warps=4)
    cfg = h.launch_config("reduction", 4096, 65, False, outer=True)
    assert (cfg.RBLOCK, cfg.persistent) == (16, False)
    assert not replace(h, outer_persistent_rnumel_max=16).launch_config("reduction", 4096, 64, False, True).persistent


def test_persistent_outer_tile_matches_eager():
    x = rand((41, 70), noncontig=True)   # columns reduced: r strided, x contiguous
    x[5, 3] = float("nan")
    for fn in (lambda x: torch.softmax(x, 0), lambda x: x.amax(0), lambda x: x.argmin(0)):
        compiled_sources(fn, [x.t().contiguous().t()], XBLOCK=32, RBLOCK=64, persistent=True, num_warps=8)


# ---- max/min and argmax/argmin ------------------------------------------------------------------------
def special_rows(shape, dtype=torch.float32):
    x = rand(shape, dtype)
    x[0, 3] = float("nan")
    x[1, 2], x[1, -2] = float("inf"), float("nan")   # a NaN after an inf: the NaN wins
    x[2, :] = float("-inf")
    x[3, 4], x[3, 9] = float("inf"), float("inf")     # a tie: the first
    x[4, :] = float("nan")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", [{}, {"XBLOCK": 2, "RBLOCK": 16, "persistent": False}])
@pytest.mark.parametrize("op", ["argmax", "argmin", "max", "min", "amax", "amin"])
def test_max_and_argmax_special_values(op, config, dtype):
    x = special_rows((6, 57), dtype)
    if op in ("max", "min"):
        fn = lambda x: tuple(getattr(torch, op)(x, -1))  # noqa: E731
    else:
        fn = lambda x: getattr(torch, op)(x, -1)  # noqa: E731
    compiled_sources(fn, [x], **config)
    compiled_sources(lambda x: getattr(torch, op)(x.t(), 0) if op not in ("max", "min") else
                     tuple(getattr(torch, op)(x.t(), 0)), [x], **config)


def test_integer_argmax():
    x = rand((7, 43), torch.int64)
    compiled_sources(lambda x: x.argmax(-1), [x])
    compiled_sources(lambda x: x.argmin(-1), [x], XBLOCK=2, RBLOCK=16, persistent=False)


def test_gpu_max_is_one_reduce_and_argmax_two():
    x = rand((64, 1000))
    ((_, src),) = gpu_sources(lambda x: x.amax(-1), [x])
    assert src.count("tl.reduce(") == 1 and "_max_nan" in src
    ((_, src),) = gpu_sources(lambda x: x.argmax(-1), [x])
    assert src.count("tl.reduce(") == 2


def test_outer_split_takes_shorter_chunks():
    """A column reduction with few x blocks: chunks of `split_outer_min_chunk` rows, so the grid
    reaches the programs the split target asks for; a row reduction keeps `split_min_chunk`."""
    h = Heuristics()
    outer = h.launch_config("reduction", 8192, 4096, False, outer=True, legal={"split": True})
    assert outer.split == 8
    assert replace(h, split_outer_min_chunk=1024).launch_config("reduction", 8192, 4096, False, outer=True,
                                                                 legal={"split": True}).split == 4
    x = rand((300, 24), noncontig=True)
    x[3, 7] = float("nan")
    compiled_sources(lambda x: (x.amax(-1), x.sum(-1)), [x], XBLOCK=16, RBLOCK=8, persistent=False, split=8)


# ---- online softmax in a split reduction ----------------------------------------------------------------
def column_rows(dtype=torch.float32):
    x = rand((611, 37), dtype)   # softmax over dim 0: rows strided, columns contiguous
    x[7, 3] = float("nan")
    x[:, 5] = float("-inf")
    x[:300, 6] = float("-inf")   # whole chunks of -inf before the column's finite values
    x[400, 8] = float("inf")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("split", [3, 8])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_split_online_softmax_matches_eager(op, split, dtype):
    fn = lambda x: getattr(torch, op)(x, 0)  # noqa: E731
    # the output apart from the split kernel (fused, a node reading the stats inside the r loop forbids a split)
    srcs = compiled_sources(fn, [column_rows(dtype)], Heuristics(reorder_loops=False), XBLOCK=8, RBLOCK=16,
                            persistent=False, split=split, online=True)
    assert any("split_ticket" in s and "tl.exp(" in s.split("split_ticket")[-1] for s in srcs)


def test_split_without_online_is_rejected_where_a_sum_needs_its_max():
    from autofuse.plan.plan import PlanError
    with pytest.raises(PlanError, match="reads the reduction"):
        compiled_sources(lambda x: torch.softmax(x, 0), [column_rows()], Heuristics(reorder_loops=False), XBLOCK=8,
                         RBLOCK=16, persistent=False, split=4, online=False)


def test_gpu_default_splits_a_column_softmax_online():
    srcs = gpu_sources(lambda x: torch.log_softmax(x, 0), [rand((4096, 512))])
    (cfg,) = [c for c, _ in srcs if c.RBLOCK > 1]
    assert cfg.split > 1 and cfg.online and not cfg.persistent


# ---- which way the lanes run -------------------------------------------------------------------------
def _outer(fn, args):
    sched = schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    return [is_outer_reduction(g) for g, _ in sched.placed if not g.is_extern and g.is_reduction]


def test_a_column_sum_times_a_column_vector_is_outer():
    """A broadcast [R, 1] operand read along r does not turn a column sum into a row one: lanes
    along r would read the [R, C] tile one element per sector."""
    x, v = rand((64, 300)), rand((64, 1))
    assert _outer(lambda x, v: (x * v).sum(0), [x, v]) == [True]
    assert _outer(lambda x, v: (x * v).sum(1), [x, v]) == [False]
    compile_and_compare(lambda x, v: (x * v).sum(0), [x, v])


def test_mixed_reads_run_lanes_along_x_in_looped_rows():
    """One operand contiguous along r, another transposed: in a looped row lanes along x keep both
    reads in whole sectors (16-element runs of the first); a row that fits a persistent kernel
    keeps its lanes along r."""
    fn = lambda a, b: torch.amax(torch.tanh(b) * a, -1)  # noqa: E731
    long = [rand((24, 1500)), rand((1500, 24)).t()]
    short = [rand((96, 200)), rand((200, 96)).t()]
    assert _outer(fn, long) == [True]
    assert _outer(fn, short) == [False]
    assert _outer(lambda a: a.sum(-1), long[:1]) == [False]
    compile_and_compare(fn, long)
    compile_and_compare(fn, short)


# ---- the order the lanes walk x ----------------------------------------------------------------------
def _lane_orders(fn, args):
    sched = schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    return [lane_order(g) for g, _ in sched.placed if not g.is_extern and g.is_reduction]


def _cl(shape, dtype=torch.float32):
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    return rand(shape, dtype).contiguous(memory_format=fmt)


LANE_CASES = {   # fn, its channels-last input's shape, the lanes' x digits and their order
    "layer_norm_last_5d": (lambda x: F.gelu(F.layer_norm(x, x.shape[-1:])), (2, 12, 3, 5, 9),
                           ((2, 12, 3, 5), (0, 2, 3, 1))),
    "sum_last_4d": (lambda x: x.sum(-1), (3, 20, 5, 9), ((3, 20, 5), (0, 2, 1))),
    "amax_height_4d": (lambda x: x.amax(2) * 2.0, (2, 13, 9, 5), ((2, 13, 5), (0, 2, 1))),
    "softmax_last_4d": (lambda x: torch.softmax(x, -1), (2, 11, 3, 10), ((2, 11, 3), (0, 2, 1))),
}
LANE_CONFIGS = [{}, {"XBLOCK": 4, "RBLOCK": 4, "persistent": False}, {"XBLOCK": 16, "RBLOCK": 16, "persistent": True}]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", range(len(LANE_CONFIGS)))
@pytest.mark.parametrize("case", sorted(LANE_CASES))
def test_outer_reduction_lanes_walk_the_contiguous_kept_dim(case, config, dtype):
    """A reduction over a dim of a channels-last tensor that leaves the channels kept reads its
    tile with lanes along channels (x in the order (n, ..., c)), persistent or looped, and matches
    eager; where the input is contiguous the lanes keep x's logical order."""
    fn, shape, (sizes, order) = LANE_CASES[case]
    x = _cl(shape, dtype)
    (lanes,) = _lane_orders(fn, [x])
    assert lanes is not None and (lanes.sizes, lanes.order) == (sizes, order)
    sources = compiled_sources(fn, [x], **LANE_CONFIGS[config])
    assert any(f"xindex % {shape[1]}" in s for s in sources)
    assert _lane_orders(fn, [x.contiguous()]) == [None]


def test_split_outer_reduction_in_lane_order():
    """A split column reduction keeps its partials per lane: the workspace is indexed by the lanes'
    x, which the combining program reads back in the same order."""
    x = _cl((2, 20, 7, 300))
    assert _lane_orders(lambda x: x.sum(-1), [x])[0] is not None
    compiled_sources(lambda x: x.sum(-1), [x], split=3, XBLOCK=8, RBLOCK=16, persistent=False)


# ---- arg-reductions as the GPU writes them ---------------------------------------------------------
def _gpu_form_run(fn, x, outs, config):
    """Run the kernel of fn in the form the GPU default writes it (NaN-propagating max/min
    instructions), through the interpreter, into `outs`."""
    from autofuse.runtime.loader import load_kernel
    sched = schedule(trace_aten(fn, [x]), [x], CompileOptions(strict=True, use_db=False))
    (g,) = [g for g, _ in sched.placed if not g.is_extern]
    low = sched.lowering
    dtypes = {i.name: i.layout.dtype for i in low.inputs if i is not None}
    dtypes |= {b.name: b.layout.dtype for b in low.buffers if hasattr(b, "layout")}
    src = KernelWriter("k", g.placements(), g.numel, g.rnumel, True, {n.name for n in g.nodes}, dtypes, {},
                       config, False).generate().source
    load_kernel("k", src, interpret=True)[(g.numel,)](x, *outs, g.numel, g.rnumel, XBLOCK=1, RBLOCK=config.RBLOCK)
    return src


@pytest.mark.parametrize("op", [torch.max, torch.min])
def test_values_and_indices_share_one_nan_propagating_reduction(op, device):
    """torch.max(x, dim): the values' NaN-propagating reduction is also the indices' best; a NaN
    wins (its first index), an all -inf row and a constant row give the first index, as eager."""
    if device != "cpu":
        pytest.skip("the GPU form runs through the interpreter here")
    x = rand((37, 300))
    x[3, 7] = x[6, 10] = x[6, 2] = float("nan")
    x[5, :] = float("-inf")
    x[8, :] = 2.0
    vals, idx = torch.empty(37), torch.empty(37, dtype=torch.int64)
    src = _gpu_form_run(lambda x: op(x, -1), x, [vals, idx], LaunchConfig(XBLOCK=1, RBLOCK=512, num_warps=4,
                                                                          persistent=True))
    assert src.count("tl.reduce(") == 2
    ev, ei = op(x, -1)
    assert torch.equal(idx, ei) and torch.allclose(vals, ev, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_realized_prologue_joins_its_looped_layer_norm(dtype):
    """An affine prologue that reads more than four buffers is realized (it has two readers), and
    the shift is computed from its body, not read back at the row's first element: prologue,
    statistics and output share one looped kernel (they ran as two), with eager's values, also
    for rows far from zero."""
    rows, cols = 5, 3001
    x = rand((rows, cols), dtype) + 40.0
    w1, w2, b2 = rand((cols,), dtype), rand((cols,), dtype), rand((cols,), dtype)
    b1 = rand((rows, 1), dtype)

    def fn(x, w1, b1, w2, b2):
        y = x * w1 + b1
        y = y * w2 + b2
        return F.layer_norm(y, (cols,))
    args = [x, w1, b1, w2, b2]
    tol = (TOL[dtype][0] * 10, TOL[dtype][1] * 10)
    compiled = compile_and_compare(fn, args, atol=tol[1], rtol=tol[0])
    generated = [k for k in kernels_of(compiled) if k.kind != "fallback"]
    assert len(generated) == 1 and generated[0].kind == "reduction", [(k.kind, k.aten_ops) for k in generated]
    # and looped, in 256-element steps: the prologue is computed in the statistics' pass and again in the output's
    sources = compiled_sources(fn, args, tol=tol, XBLOCK=2, RBLOCK=256, persistent=False)
    assert len(sources) == 1


def test_norm_weight_and_bias_load_one_row_per_block():
    """A layer norm's weight and bias vary along r only: each is one [1, RBLOCK] load under rmask,
    broadcast over the block's rows, and the result matches eager with several rows per program."""
    x, w, b = rand((37, 187)), rand((187,)), rand((187,))

    def fn(x, w, b):
        return F.layer_norm(x, (187,), w, b)
    srcs = gpu_sources(fn, [x, w, b])
    (cfg, src), = [(c, s) for c, s in srcs if "var_mean" in s or "rsqrt" in s]
    assert cfg.persistent and cfg.XBLOCK > 1
    row_loads = re.findall(r"tl\.load\(in_ptr\d \+ \(rindex\), rmask", src)
    assert len(row_loads) == 2, src
    compiled = compile_traced(fn, [x, w, b], CompileOptions(strict=True, use_db=False, poison=True))
    assert_close(compiled(x, w, b)[0], fn(x, w, b))


def test_a_sum_over_a_channels_last_activation_reads_channels_innermost():
    """A sum over the channels and positions of each image, after a convolution lowered
    channels-last (eager's layout there is NCHW): its r loop runs in the order autofuse stored the
    activation, channels innermost, reading contiguous memory."""
    x, w = rand((4, 3, 20, 18), device="cpu"), rand((16, 3, 3, 3), device="cpu")
    fn = lambda x, w: torch.relu(F.conv2d(x, w)).sum((1, 2, 3))  # noqa: E731
    heur = Heuristics(conv_layout="channels_last")
    sched = schedule(trace_aten(fn, [x, w]), [x, w], CompileOptions(strict=True, use_db=False, heuristics=heur))
    (red,) = [n for g in sched.groups if not g.is_extern for n in g.nodes if n.kind == "reduction"]
    (read,) = [d for d in red.reads if d.index.has(red.rvars[-1])]
    assert read.index.coeff(red.rvars[-1]) == 1, read
    compiled_sources(fn, [x, w], heuristics=heur, tol=(1e-3, 1e-3))


def test_a_column_sum_of_row_softmax_values_runs_its_lanes_along_the_columns():
    """softmax(x, -1).sum(-2): the sum reads the whole matrix down its columns and each row's max and
    sum along them; the strided reads outweigh the others, so its lanes run along x (a column
    sum's config) though its columns fit a persistent kernel."""
    x = rand((3, 300, 257), device="cpu")
    fn = lambda x: torch.softmax(x * 0.125, -1).sum(1)  # noqa: E731
    sched = schedule(trace_aten(fn, [x]), [x], CompileOptions(strict=True, use_db=False))
    groups = [g for g in sched.groups if g.is_reduction]
    assert [is_outer_reduction(g) for g in groups] == [False, True]
    compiled_sources(fn, [x], tol=(1e-4, 1e-4))



def _r_loads(sources: list[str]) -> list[str]:
    return [line.strip() for src in sources for line in src.splitlines() if "tl.load" in line and "rindex" in line]


@pytest.mark.parametrize("looped", [False, True])
def test_group_norm_of_a_channels_last_activation_reads_channels_innermost(looped):
    """F.group_norm's statistics reduce [N, G, C/G, H*W]; over a convolution computed channels-last
    (eager's strides for it are NCHW) the view's digits joined back make the read linear, and the r
    loop walks a group's channels innermost."""
    x, wc = rand((3, 5, 9, 11)), rand((16, 5, 3, 3))
    w, b = rand((16,)), rand((16,))

    def fn(x, wc, w, b):
        return F.group_norm(F.conv2d(x, wc), 4, w, b)
    config = dict(persistent=False, RBLOCK=16) if looped else {}
    loads = _r_loads(compiled_sources(fn, [x, wc, w, b], heuristics=Heuristics(conv_layout="channels_last"),
                                      tol=(1e-3, 1e-3), **config))
    reads = [ld for ld in loads if "(rindex // 4)" in ld or "(rindex % 4)" in ld]
    assert reads and all("(16 * (rindex // 4))" in ld and "(rindex % 4)" in ld for ld in reads), loads


@pytest.mark.parametrize("op", ["var_mean", "sum"])
def test_a_flattened_group_is_visited_position_major(op):
    """x.view(N, G, -1) of a channels-last activation reduced over its last dim: one r dim of
    (channel, position) digits, visited position-major so a group's channels are read together."""
    x = rand((2, 12, 5, 7)).to(memory_format=torch.channels_last)

    def fn(x):
        v = x.reshape(2, 3, -1)
        return torch.var_mean(v, -1) if op == "var_mean" else v.sum(-1)
    loads = _r_loads(compiled_sources(fn, [x]))
    reads = [ld for ld in loads if "in_ptr0" in ld]
    assert reads and all("(12 * (rindex // 4))" in ld and "(rindex % 4)" in ld for ld in reads), loads
