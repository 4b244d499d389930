"""Value ranges of index arithmetic (ir/ranges.py): an indirect index known to lie in
[0, size) loses its negative wrap and becomes int32 in an int32 kernel; one that may be negative
keeps it. Checked on the generated source and against eager."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import autofuse
from autofuse.api import Recorder
from autofuse.ir.ranges import cast_range, comparison_truth, op_range
from tests.helpers import assert_close, rand


def _source(fn, *args):
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(fn, strict=True, use_db=False, poison=True, recorder=rec)
    with torch.no_grad():
        assert_close(f(*args), fn(*args))
    (kernel,) = [k for _, _, art in rec.graphs for k in art.kernels if k.kind == "pointwise"]
    return kernel.source[kernel.source.index("def triton"):]   # the kernel, not the prelude


def test_rules():
    assert op_range("add", [(0.0, 3.0), (1.0, 1.0)], torch.int64) == (1.0, 4.0)
    assert op_range("sub", [(0.0, 3.0), (1.0, 2.0)], torch.int64) == (-2.0, 2.0)
    assert op_range("mul", [(-2.0, 3.0), (-1.0, 4.0)], torch.int64) == (-8.0, 12.0)
    assert op_range("minimum", [(0.0, 30.0), (10.0, 10.0)], torch.int64) == (0.0, 10.0)
    assert op_range("where", [None, (0.0, 3.0), (5.0, 6.0)], torch.int64) == (0.0, 6.0)
    assert op_range("where", [None, (0.0, 3.0), None], torch.int64) is None
    assert op_range("exp", [(0.0, 1.0)], torch.float32) is None
    assert op_range("add", [(0.0, 2.0 ** 31), (1.0, 1.0)], torch.int32) is None   # past int32
    lo, hi = op_range("mul", [(0.0, 111.0), (0.5, 0.5)], torch.float32)
    assert lo < 0.0 < 55.5 < hi < 55.6                                        # widened for rounding
    assert cast_range((-1e-6, 55.5001), torch.float32, torch.int64) == (0.0, 55.0)   # truncation
    assert cast_range((0.0, 70000.0), torch.float32, torch.float16) is None          # inf in f16
    assert op_range("bitwise_and", [None, (127.0, 127.0)], torch.int64) == (0.0, 127.0)  # a loaded value & 127
    assert op_range("bitwise_and", [None, (-128.0, 127.0)], torch.int64) is None


def test_gathered_indices_wrapped_by_a_power_of_two_need_no_second_wrap(device):
    """take_along_dim wraps its indices with a remainder by the dim's size, `& 127` at 128: the
    gather then reads them as they are, in int32 (and still reads from the end for -1)."""
    x = rand((19, 128), device=device)
    i = torch.randint(-128, 128, (19, 1), device=device)
    src = _source(lambda x, i: torch.relu(torch.take_along_dim(x, i, 1)), x, i)
    assert "& " in src and "< 0, " not in src.split("tl.load(in_ptr1")[0]


def test_float_ranges_hold_under_float32_rounding():
    """Positions computed in float32 as a resize computes them stay inside their ranges."""
    gen = np.random.default_rng(0)
    for _ in range(200):
        n = int(gen.integers(2, 5000))
        scale = float(np.float32(gen.uniform(0.01, 7.0)))
        d = np.arange(n, dtype=np.float32)
        src = np.maximum((d + np.float32(0.5)) * np.float32(scale) - np.float32(0.5), np.float32(0.0))
        r = op_range("maximum", [op_range("sub", [op_range("mul", [op_range("add", [(0.0, n - 1.0), (0.5, 0.5)],
                     torch.float32), (scale, scale)], torch.float32), (0.5, 0.5)], torch.float32), (0.0, 0.0)],
                     torch.float32)
        assert r[0] <= src.min() and src.max() <= r[1]
        t = cast_range(r, torch.float32, torch.int64)
        assert t[0] <= src.astype(np.int64).min() and src.astype(np.int64).max() <= t[1]


RESIZES = [dict(scale_factor=1.7, mode="nearest"), dict(size=(5, 40), mode="nearest"), dict(scale_factor=0.5, mode="nearest"),
           dict(scale_factor=1.7, mode="bilinear"), dict(scale_factor=2, mode="bilinear", align_corners=True),
           dict(size=(7, 30), mode="bilinear"), dict(scale_factor=0.37, mode="bilinear")]


@pytest.mark.parametrize("params", RESIZES, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_resize_positions_need_no_wrap(params, device):
    """F.interpolate reaches the graph decomposed (positions from aranges, clamped and truncated)."""
    x = rand((2, 3, 13, 17), device=device)
    src = _source(lambda t: F.interpolate(torch.tanh(t), **params), x)
    assert "< 0, " not in src, "a position known to be in range is wrapped"
    assert re.search(r"tmp\d+ = tmp\d+\.to\(tl\.int32\)", src), "an int64 position is not narrowed"


def test_resize_in_bf16_and_channels_last(device):
    x = rand((2, 4, 10, 9), torch.bfloat16, device=device)
    _source(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), x)
    x = rand((2, 4, 10, 9), device=device).to(memory_format=torch.channels_last)
    _source(lambda t: F.interpolate(t, scale_factor=1.5, mode="nearest"), x)


def test_indices_that_may_be_negative_keep_the_wrap(device):
    x = rand((4, 19), device=device)
    # -5 .. 13: the first five read from the end, as in eager
    assert "< 0, " in _source(lambda t: t[:, torch.arange(19, device=t.device) - 5] * 2, x)
    i = torch.randint(-19, 19, (7,), device=device)   # loaded indices: no range known
    assert "< 0, " in _source(lambda t, i: t[:, i] * 2, x, i)


def test_comparisons_the_ranges_decide():
    assert comparison_truth("lt", (0.0, 12.0), (13.0, 13.0)) is True
    assert comparison_truth("ge", (0.0, 12.0), (0.0, 0.0)) is True
    assert comparison_truth("ge", (-1.0, 11.0), (0.0, 0.0)) is None
    assert comparison_truth("gt", (-5.0, -1.0), (0.0, 0.0)) is False
    assert comparison_truth("eq", (3.0, 3.0), (3.0, 3.0)) is True
    assert comparison_truth("ne", (0.0, 2.0), (3.0, 4.0)) is True
    assert comparison_truth("le", None, (0.0, 0.0)) is None


@pytest.mark.parametrize("include_pad", [False, True])
def test_pooling_window_checks_the_index_cannot_fail_fold_away(include_pad, device):
    """A 3x3 window at stride 1 with padding 1: of the 36 bound checks only the four that can fail
    (row - 1 >= 0, col - 1 >= 0, row + 1 < H, col + 1 < W) stay in the kernel, and the padding's
    zeros come from the masked loads alone."""
    x = rand((2, 5, 11, 13), device=device).transpose(2, 3)   # non-contiguous
    src = _source(lambda t: F.avg_pool2d(t, 3, 1, 1, count_include_pad=include_pad), x)
    assert src.count(" >= ") == 2, src
    assert len(re.findall(r"= tmp\d+ < tmp\d+", src)) == 2, src
    assert src.count("tl.load(") == 9
    assert "tl.where" not in src, "a masked load's zeros selected again"


def test_a_select_on_a_decided_condition_keeps_one_branch(device):
    x = rand((6, 7), device=device)
    # j < 7 holds for every column: the where keeps x, and no comparison is emitted
    src = _source(lambda t: torch.where(torch.arange(7, device=t.device) < 7, t, -t) * 3, x)
    assert " < tmp" not in src and "tl.where" not in src, src


def test_constant_dims_fold_what_ranges_decide():
    """A dim whose index only feeds comparisons that ranges decide is one the value is constant
    along; a dim read by a load (directly, or through an index read from memory) or by a comparison
    that depends on it is not."""
    from autofuse.ir.dependence import constant_dims

    i64, f32 = torch.int64, torch.float32

    def always(ops, idx):   # keep[i0, i2] where i1 >= 0 (always), 0 elsewhere
        keep = ops.load("keep", idx[0] * 7 + idx[2])
        cond = ops.ge(ops.index_expr(idx[1], i64), ops.constant(0, i64))
        return ops.where(cond, keep, ops.constant(0.0, f32))

    def sometimes(ops, idx):  # i1 < 3 holds for some rows of 5 only
        cond = ops.lt(ops.index_expr(idx[1], i64), ops.constant(3, i64))
        return ops.where(cond, ops.load("keep", idx[0] * 7 + idx[2]), ops.constant(0.0, f32))

    def gathered(ops, idx):   # table[index[i0]]: reads i0 through the index, nothing of i1
        return ops.load("table", ops.indirect(ops.load("index", idx[0]), 10))

    assert constant_dims(always, (4, 5, 7)) == (1,)
    assert constant_dims(sometimes, (4, 5, 7)) == ()
    assert constant_dims(gathered, (4, 5)) == (1,)
    assert constant_dims(always, (4, 1, 7)) == ()   # a dim of one element is no broadcast


def test_a_views_digits_join_back_into_the_position():
    """m*(x // m) + x % m is x: a view of a view reads its position again, linear in each variable."""
    import sympy
    from autofuse.ir.index import FloorDiv, ModIndex, simplify_index
    i, r = sympy.symbols("i r", integer=True, nonnegative=True)
    assert simplify_index(62 * FloorDiv(r, 62) + ModIndex(r, 62) + 7 * i, {i: 5, r: 3844}) == r + 7 * i
    assert simplify_index(14 * FloorDiv(i + 3 * r, 7) + 2 * ModIndex(i + 3 * r, 7) + 5, {i: 100, r: 5}) == 2 * i + 6 * r + 5
    assert simplify_index(7 * FloorDiv(r, 6) + ModIndex(r, 6), {r: 100}) != r     # other divisors stay
