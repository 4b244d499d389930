"""2-D tiled pointwise kernels (LaunchConfig.YBLOCK, codegen/tiling.py): a kernel whose loads and
store are contiguous along different dims runs as [YBLOCK, XBLOCK] tiles of its (y, x) split.
Outputs match eager on poisoned buffers for transposes of 2-D/3-D/4-D tensors with non-power-of-two
sizes, NCHW <-> NHWC, channels-last and non-contiguous inputs, broadcast operands, float, bf16 and
integer dtypes, at the default tile and at small tiles with partial edges; the split follows
Inductor's rule; illegal tiles are refused with a reason; the search offers tiles and 1-D twins;
kernels that do not transpose keep their 1-D code."""
from dataclasses import replace

import re

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.codegen.options import KernelView, option
from autofuse.codegen.tiling import Tiling, choose_tiling, default_tile
from autofuse.codegen.triton_kernel import KernelWriter
from autofuse.compiler import compile_graph, schedule
from autofuse.plan.apply import check_config
from autofuse.runtime.program import KernelLaunch
from autofuse.search.records import arg_types
from autofuse.search.candidates import candidate_configs, neighbour_configs
from costmodel.features import _config_features
from tests.helpers import assert_close, kernels_of, rand

OPTS = CompileOptions(strict=True, use_db=False, poison=True)


def to_nchw(x):
    return x.permute(0, 3, 1, 2).contiguous()


def to_nhwc(x):
    return x.permute(0, 2, 3, 1).contiguous()


def transposed_add(x, y):
    return x.t() + y


def cl_epilogue(x, b):
    """A channels-last convolution's epilogue writing eager's NCHW layout: bias, ReLU."""
    return torch.relu(x.contiguous() + b)


def cl(shape, dtype=torch.float32):
    return rand(shape, dtype).to(memory_format=torch.channels_last)


PROGRAMS = {
    "t2d": (lambda x: x.t().contiguous(), lambda dt: [rand((37, 45), dt)]),
    "t2d_add": (transposed_add, lambda dt: [rand((37, 45), dt), rand((45, 37), dt)]),
    "t3d": (lambda x: x.transpose(0, 2).contiguous() * 2, lambda dt: [rand((5, 33, 19), dt)]),
    "nchw_to_nhwc": (to_nhwc, lambda dt: [rand((2, 35, 7, 9), dt)]),
    "nhwc_to_nchw": (to_nchw, lambda dt: [rand((2, 7, 9, 35), dt)]),
    "cl_epilogue": (cl_epilogue, lambda dt: [cl((3, 35, 6, 11), dt), rand((35, 1, 1), dt)]),
    "noncontig_bcast": (lambda x, b: (x + b).contiguous(), lambda dt: [rand((50, 70), dt, noncontig=True),
                                                                        rand((70,), dt)]),
}


def compiled_with(fn, args, config_of=None):
    """fn compiled with its tiled kernels' configs replaced by config_of(default config)."""
    if config_of is None:
        return compile_traced(fn, args, OPTS)
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    kernels = tuple(replace(kp, config=config_of(kp.config)) if info.config.YBLOCK else kp
                    for kp, info in zip(art.plan.kernels, art.kernels))
    return compile_traced(fn, args, replace(OPTS, plan=replace(art.plan, kernels=kernels)))


def run_and_check(fn, args, config_of=None):
    compiled = compiled_with(fn, args, config_of)
    expected = fn(*args)
    assert_close(compiled(*args)[0], expected)
    return kernels_of(compiled)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_transposing_kernels_are_tiled_by_default_and_match_eager(name, dtype):
    fn, make = PROGRAMS[name]
    (k,) = run_and_check(fn, make(dtype))
    assert k.config.YBLOCK > 0
    assert "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]" in k.source


@pytest.mark.parametrize("tile", [(4, 8), (16, 2), (1, 32), (8, 1)])
@pytest.mark.parametrize("name", ["t2d_add", "t3d", "nhwc_to_nchw", "cl_epilogue", "noncontig_bcast"])
def test_small_tiles_with_partial_edges_match_eager(name, tile):
    fn, make = PROGRAMS[name]
    y, x = tile
    (k,) = run_and_check(fn, make(torch.float32), lambda c: replace(c, YBLOCK=y, XBLOCK=x, num_warps=1))
    assert (k.config.YBLOCK, k.config.XBLOCK) == tile
    assert re.search(r"xmask = \(yindex < \d+\) & \(xindex < \d+\)", k.source)


def test_tiles_that_divide_both_sides_have_a_constant_mask():
    (k,) = run_and_check(to_nchw, [rand((2, 8, 4, 32))], lambda c: replace(c, YBLOCK=8, XBLOCK=16))
    assert "xmask = tl.full([YBLOCK, XBLOCK], True, tl.int1)" in k.source


def test_bool_and_int64_values():
    x = rand((3, 5, 7, 11)) > 0
    (k,) = run_and_check(lambda a: to_nhwc(a) & True, [x], lambda c: replace(c, YBLOCK=4, XBLOCK=4))
    assert k.config.YBLOCK == 4
    y = rand((6, 9, 13), torch.int64)
    run_and_check(lambda a: a.permute(2, 0, 1).contiguous() + 1, [y], lambda c: replace(c, YBLOCK=2, XBLOCK=16))


def test_index_values_and_constants_broadcast_to_the_tile():
    def fn(x):
        return (x.t() * torch.arange(37, dtype=x.dtype, device=x.device)
                + torch.full((45, 1), 2.0, device=x.device)).contiguous()

    kernels = run_and_check(fn, [rand((37, 45))], lambda c: replace(c, YBLOCK=8, XBLOCK=4))
    assert [k.config.YBLOCK for k in kernels if k.config.YBLOCK] == [8]


def test_offsets_past_int32_are_computed_in_int64():
    (g,) = groups_of(to_nchw, [rand((2, 7, 9, 35))])
    cfg = LaunchConfig(XBLOCK=8, YBLOCK=16)
    spans = {n: 2**32 for n in ("arg0", "buf0")}
    src = KernelWriter("k", g.placements(), g.numel, g.rnumel, False, {"buf0"}, {"arg0": torch.float32},
                       spans, cfg, True).generate().source
    assert "yoffset = tl.program_id(1).to(tl.int64) * YBLOCK" in src
    assert "xoffset = tl.program_id(0).to(tl.int64) * XBLOCK" in src


def groups_of(fn, args):
    return [g for g in schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups
            if not g.is_extern]


def test_the_split_follows_inductors_rule():
    # NHWC -> NCHW: the load is contiguous along C, so y is (N, C) and x is (H, W)
    (g,) = groups_of(to_nchw, [rand((2, 7, 9, 35))])
    assert choose_tiling(g.placements()) == Tiling(2 * 35, 7 * 9)
    (g,) = groups_of(transposed_add, [rand((37, 45)), rand((45, 37))])
    assert choose_tiling(g.placements()) in (Tiling(37, 45), Tiling(45, 37))
    # a broadcast operand alone (contiguous along a dim followed by broadcast dims) asks for nothing
    (g,) = groups_of(lambda x, b: x + b, [rand((40, 50)), rand((40, 1))])
    assert choose_tiling(g.placements()) is None
    assert option("YBLOCK").eligible(KernelView.of(g), True, 1) is not None


def test_default_tile_is_inductors_32_by_32_shrunk_and_grid_bounded():
    assert default_tile(Tiling(2048, 12544), False, 1 << 16) == (32, 32, 4)
    assert default_tile(Tiling(126, 5), False, 1 << 16) == (128, 8, 4)
    y, x, _ = default_tile(Tiling(1 << 24, 4), False, 1 << 16)
    assert x == 4 and -(-(1 << 24) // y) <= 65535
    y, x, _ = default_tile(Tiling(37, 45), True, 1 << 16)
    assert (y, x) == (64, 64)


def test_illegal_tiles_are_refused_with_a_reason():
    (g,) = groups_of(lambda x, y: x * y + 1, [rand((37, 45)), rand((45,))])
    assert check_config(LaunchConfig(XBLOCK=32, YBLOCK=32), g).startswith("2-D tiles (YBLOCK=32) are impossible")
    (r,) = groups_of(lambda x: x.sum(-1), [rand((37, 45))])
    why = check_config(replace(LaunchConfig(XBLOCK=8, RBLOCK=64), YBLOCK=4), r)
    assert "pointwise kernels" in why
    (t,) = groups_of(to_nchw, [rand((2, 7, 9, 35))])
    assert check_config(LaunchConfig(XBLOCK=32, YBLOCK=24), t) == "YBLOCK=24 is not a power of two"
    assert check_config(LaunchConfig(XBLOCK=32, YBLOCK=32), t) is None
    assert check_config(LaunchConfig(XBLOCK=1024), t) is None  # 1-D is always legal


def test_the_search_offers_tiles_and_their_one_dimensional_twins():
    (g,) = groups_of(to_nchw, [rand((4, 64, 30, 70))])
    default = LaunchConfig(XBLOCK=32, YBLOCK=32)
    cands = candidate_configs(g, default, interpret=False, limit=400)
    assert any(c.YBLOCK == 0 for c in cands) and sum(c.YBLOCK > 0 for c in cands) > 1
    near = neighbour_configs(default, g)
    assert LaunchConfig(XBLOCK=16, YBLOCK=64) in near and LaunchConfig(XBLOCK=64, YBLOCK=16) in near
    assert LaunchConfig(XBLOCK=1024) in near
    assert all(check_config(c, g) is None for c in cands + near)
    assert LaunchConfig(XBLOCK=32, YBLOCK=32) in neighbour_configs(LaunchConfig(XBLOCK=1024), g)
    (p,) = groups_of(lambda x: torch.relu(x) * 2, [rand((4, 64, 30, 70))])
    assert all(c.YBLOCK == 0 for c in candidate_configs(p, LaunchConfig(XBLOCK=1024), False, limit=400)
               + neighbour_configs(LaunchConfig(XBLOCK=1024), p))


def test_the_launch_is_a_two_dimensional_grid_over_y_and_x():
    x = rand((2, 7, 9, 35))
    compiled = compiled_with(to_nchw, [x], lambda c: replace(c, YBLOCK=16, XBLOCK=8))
    compiled(x)
    (prog,) = compiled.compiled.programs.values()
    (launch,) = [s for s in prog.steps if isinstance(s, KernelLaunch)]
    assert launch._grid == (-(-63 // 8), -(-70 // 16)) and launch._sizes == (70, 63)
    assert list(launch._consts) == ["YBLOCK", "XBLOCK"]
    env = prog.new_env([x])
    for step in prog.steps:
        if step is launch:
            break
        step.run(env)
    assert arg_types(launch, env) == ["*fp32", "*fp32", "i32", "i32"]
    f = _config_features({"kind": "pointwise", "numel": 4410, "rnumel": 1,
                          "config": {"XBLOCK": 8, "YBLOCK": 16, "num_warps": 4}}, 132)
    assert f["block_elems"] == 128 and f["grid"] == -(-4410 // 128)


NON_TRANSPOSING = {
    "bias_relu": (lambda x, b: torch.relu(x) * b + 1, lambda: [rand((37, 45)), rand((45,))]),
    "same_layout_cl": (lambda x, y: x * y, lambda: [cl((2, 5, 7, 9)), cl((2, 5, 7, 9))]),
    "rowsum": (lambda x: torch.sigmoid(x).sum(-1), lambda: [rand((17, 300))]),
}


@pytest.mark.parametrize("name", sorted(NON_TRANSPOSING))
def test_kernels_that_do_not_transpose_keep_their_one_dimensional_code(name):
    fn, make = NON_TRANSPOSING[name]
    for k in run_and_check(fn, make()):
        assert k.config.YBLOCK == 0 and "YBLOCK" not in k.source and "program_id(1)" not in k.source


def test_a_transposing_kernel_forced_one_dimensional_is_the_flat_kernel():
    (k,) = run_and_check(to_nchw, [rand((2, 7, 9, 35))], lambda c: replace(c, YBLOCK=0, XBLOCK=256))
    assert "xindex = xoffset + tl.arange(0, XBLOCK)\n" in k.source and "yindex" not in k.source
    assert f"def {k.fn_name}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):" in k.source
