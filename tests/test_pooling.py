"""Max and average pooling (2-D and 3-D) lowered as pointwise window values (lower/pooling.py), against eager:
kernel sizes, strides, padding, dilation, ceil mode, eager's divisors, NaN and -inf, bf16, strided
and channels-last inputs; the op before a pool computed inside its kernel; max pooling's indices and
its backward generated (eager's index for ties, NaN and padding), ATen's kernel with dilation."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import autofuse
from autofuse.api import Recorder
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, rand

POOLS = [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2), dict(kernel_size=3, stride=2, ceil_mode=True),
         dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1)), dict(kernel_size=3, stride=1, padding=1),
         dict(kernel_size=(2, 4), stride=(3, 3), padding=(1, 2), ceil_mode=True)]


def _compiled(fn, *args, heuristics=None):
    torch._dynamo.reset()
    rec = Recorder()
    kw = {"heuristics": heuristics} if heuristics else {}
    f = autofuse.compile(fn, strict=True, use_db=False, poison=True, recorder=rec, **kw)
    return f, rec


def _kernels(rec):
    return [k for _, _, art in rec.graphs for k in art.kernels]


def _assert_one_pooling_kernel(fn, x, op):
    """fn compiled equals eager, in one pointwise kernel that pools with `op`."""
    f, rec = _compiled(fn, x)
    with torch.no_grad():
        assert_close(f(x), fn(x))
    kernels = _kernels(rec)
    assert len(kernels) == 1 and kernels[0].kind == "pointwise" and op in kernels[0].aten_ops


@pytest.mark.parametrize("params", POOLS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_relu_then_pool_in_one_kernel(params, device):
    x = rand((2, 5, 13, 11), device=device)
    x[0, 1, 4, 4] = float("nan")
    x[1, 2, :3, :3] = float("-inf")
    _assert_one_pooling_kernel(lambda x: F.max_pool2d(torch.relu(x) - 0.5, **params), x, "max_pool2d")


AVG_POOLS = [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2), dict(kernel_size=3, stride=2, ceil_mode=True),
             dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
             dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True, count_include_pad=False),
             dict(kernel_size=3, padding=1, divisor_override=4), dict(kernel_size=(2, 4), stride=3, padding=(1, 2), ceil_mode=True)]


@pytest.mark.parametrize("params", AVG_POOLS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_relu_then_average_pool_in_one_kernel(params, device):
    x = rand((2, 5, 13, 11), device=device)
    _assert_one_pooling_kernel(lambda x: F.avg_pool2d(torch.relu(x) - 0.5, **params), x, "avg_pool2d")


def test_average_pool_training_step(device):
    """The forward pools in a generated kernel, the backward (no indices) runs as ATen's kernel."""
    x = rand((2, 4, 9, 10), device=device).requires_grad_()
    fn = lambda x: F.avg_pool2d(torch.tanh(x), 3, 2, 1, count_include_pad=False)  # noqa: E731
    f, _ = _compiled(fn, x)
    g = rand((2, 4, 5, 5), device=device)
    out = f(x)
    assert_close(out, fn(x))
    out.backward(g)
    got = x.grad.clone()
    x.grad = None
    fn(x).backward(g)
    assert_close(got, x.grad)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("layout", ["noncontig", "channels_last", "unbatched", "bf16"])
def test_input_layouts_and_dtypes(layout, pool, device):
    if layout == "noncontig":
        x = rand((2, 6, 11, 9), device=device).transpose(2, 3)
    elif layout == "channels_last":
        x = rand((2, 6, 10, 9), device=device).to(memory_format=torch.channels_last)
    elif layout == "unbatched":
        x = rand((6, 10, 9), device=device)
    else:
        x = rand((2, 6, 10, 9), torch.bfloat16, device=device)
    fn = (lambda x: F.max_pool2d(x, 3, 2, 1)) if pool == "max" else (lambda x: F.avg_pool2d(x, 3, 2, 1))
    f, rec = _compiled(fn, x)
    with torch.no_grad():
        assert_close(f(x), fn(x))
    assert all(k.kind != "fallback" for k in _kernels(rec))


def test_between_channels_last_convolutions(device):
    """conv -> relu -> pool -> conv with channels-last operands: the pool reads the NHWC activation."""
    torch.manual_seed(0)
    c1, c2 = torch.nn.Conv2d(3, 8, 3, padding=1).to(device), torch.nn.Conv2d(8, 4, 3).to(device)
    fn = lambda x: c2(F.max_pool2d(torch.relu(c1(x)), 3, 2, 1))  # noqa: E731
    x = rand((2, 3, 17, 15), device=device)
    f, _ = _compiled(fn, x, heuristics=Heuristics(conv_layout="channels_last"))
    with torch.no_grad():
        assert_close(f(x), fn(x))


def _max_pool_step(fn, x, g):
    """The compiled function's output, indices-driven input gradient and kernels, against eager's."""
    f, rec = _compiled(fn, x)
    out = f(x)
    assert_close(out, fn(x))
    out.backward(g)
    got = x.grad.clone()
    x.grad = None
    fn(x).backward(g)
    assert_close(got, x.grad)
    return _kernels(rec)


TRAIN_POOLS = [p for p in POOLS if p.get("dilation", 1) == 1]


@pytest.mark.parametrize("params", TRAIN_POOLS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "bf16"])
def test_training_step_generates_indices_and_backward(params, layout, device):
    """The forward writes eager's indices and the backward gathers each element's gradients from the
    windows that chose it, both as generated kernels (ties: many equal values; NaN wins its window)."""
    dtype = torch.bfloat16 if layout == "bf16" else torch.float32
    x = rand((2, 5, 11, 10), dtype, device=device)
    x[0, 1] = x[0, 1].round()              # ties inside windows: the first position keeps its place
    x[1, 2, 3, 4] = float("nan")
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    # f32: a prologue fused into the window; bf16: an exact one, since eager rounds tanh's values to
    # bf16 before comparing them and a kernel keeps f32, so near-ties may pick another element
    # (torch.compile alike)
    fn = (lambda x: F.max_pool2d(-x, **params)) if dtype == torch.bfloat16 else (  # noqa: E731
        lambda x: F.max_pool2d(torch.tanh(x) * 3, **params))
    with torch.no_grad():
        g = rand(tuple(fn(x).shape), dtype, device=device)
    kernels = _max_pool_step(fn, x, g)
    assert all(k.kind != "fallback" for k in kernels)
    assert any("max_pool2d_backward" in k.aten_ops for k in kernels)
    f, _ = _compiled(lambda x: F.max_pool2d_with_indices(x, **params), x)
    with torch.no_grad():
        got, want = f(x), F.max_pool2d_with_indices(x, **params)
    assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("pool", ["avg", "avg-padded", "max", "max-indices"])
def test_a_window_far_wider_than_the_map_visits_only_the_map(pool, device):
    """EfficientNet's head averages its map with a window of its channel count (2560) in ceil mode:
    the kernel visits the positions some window can reach, not 2560 x 2560 masked ones."""
    x = rand((2, 6, 7, 5), device=device)
    fn = {"avg": lambda t: F.avg_pool2d(t, 2560, ceil_mode=True),
          "avg-padded": lambda t: F.avg_pool2d(t, (9, 40), padding=(4, 1), ceil_mode=True),
          "max": lambda t: F.max_pool2d(t, 300, ceil_mode=True),
          "max-indices": lambda t: F.max_pool2d_with_indices(t, (30, 8), padding=(1, 2), ceil_mode=True)}[pool]
    f, rec = _compiled(fn, x)
    with torch.no_grad():
        got, want = f(x), fn(x)
    assert_close(got, want)
    kernels = _kernels(rec)
    assert kernels and all(k.kind == "pointwise" for k in kernels)
    assert all(k.source.count("tl.load(") <= 2 * 7 * 5 for k in kernels)


def test_padding_only_windows_point_at_their_first_element(device):
    """A window of -inf values keeps eager's index: its first in-bounds position."""
    x = torch.full((1, 2, 6, 6), float("-inf"), device=device)
    x[0, 0, 2, 2] = 1.0
    f, _ = _compiled(lambda x: F.max_pool2d_with_indices(x, 3, 2, 1), x)
    with torch.no_grad():
        got, want = f(x), F.max_pool2d_with_indices(x, 3, 2, 1)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_dilated_max_pool_training_uses_atens_kernels(device):
    """With dilation the indices and the backward run as ATen's kernels, still correct."""
    x = rand((2, 4, 11, 10), device=device).requires_grad_()
    fn = lambda x: F.max_pool2d(torch.tanh(x), 3, 2, 1, dilation=2)  # noqa: E731
    with torch.no_grad():
        g = rand(tuple(fn(x).shape), device=device)
    kernels = _max_pool_step(fn, x, g)
    assert any("max_pool2d_with_indices" in k.aten_ops for k in kernels if k.kind == "fallback")


POOLS_3D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=(1, 3, 2), stride=(1, 2, 2)),
            dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=(2, 3, 3), stride=2, padding=(0, 1, 1))]


@pytest.mark.parametrize("params", POOLS_3D, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_3d_pools_in_one_kernel(params, device):
    """max_pool3d and avg_pool3d (count_include_pad both ways) after a pointwise op, one kernel each."""
    x = rand((2, 3, 7, 9, 10), device=device)
    x[0, 1, 2, 3, 4] = float("nan")
    _assert_one_pooling_kernel(lambda x: F.max_pool3d(torch.relu(x) - 0.5, **params), x, "max_pool3d")
    _assert_one_pooling_kernel(lambda x: F.avg_pool3d(torch.relu(x) - 0.5, **params), x, "avg_pool3d")
    if params.get("padding"):
        _assert_one_pooling_kernel(lambda x: F.avg_pool3d(x * 2, **params, count_include_pad=False), x, "avg_pool3d")


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "unbatched"])
def test_3d_max_pool_training_step(layout, device):
    """3-D max pooling's indices (flat over depth, height and width, as eager's) and its backward
    as generated kernels, ties and NaN included."""
    x = rand((2, 3, 7, 9, 8), device=device)
    x[0, 1] = x[0, 1].round()
    x[1, 2, 3, 4, 5] = float("nan")
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last_3d)
    elif layout == "unbatched":
        x = x[0]
    x.requires_grad_()
    fn = lambda x: F.max_pool3d(torch.tanh(x) * 3, 3, 2, 1)  # noqa: E731
    with torch.no_grad():
        g = rand(tuple(fn(x).shape), device=device)
    kernels = _max_pool_step(fn, x, g)
    assert all(k.kind != "fallback" for k in kernels)
    assert any("max_pool3d_backward" in k.aten_ops for k in kernels)
    f, _ = _compiled(lambda x: F.max_pool3d_with_indices(x, (2, 3, 3), 2, (1, 1, 0)), x)
    with torch.no_grad():
        got, want = f(x), F.max_pool3d_with_indices(x, (2, 3, 3), 2, (1, 1, 0))
    assert_close(got[0], want[0])
    assert torch.equal(got[1], want[1])


def test_strided_windows_take_more_lanes_on_the_gpu():
    """On the GPU, a pool whose windows step by 2 (reads strided along the innermost dim) runs 2
    elements a lane (Inductor's other pointwise config); a stride-1 pool and a plain pointwise kernel
    keep 8 a lane (docs/defaults.md)."""
    from autofuse import CompileOptions
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import default_config, schedule
    x = rand((2, 3, 17, 22), device="cpu")
    cases = ((lambda t: F.max_pool2d(t, 3, 2, 1), (512, 8)), (lambda t: F.avg_pool2d(t, 2), (512, 8)),
             (lambda t: F.avg_pool2d(t, 3, 1, 1), (1024, 4)), (lambda t: torch.relu(t) * 2, (1024, 4)))
    for fn, expected in cases:
        sched = schedule(trace_aten(fn, [x]), [x], CompileOptions(strict=True, use_db=False))
        (g,) = [g for g in sched.groups if not g.is_extern]
        cfg = default_config(g, Heuristics(), interpret=False)
        assert (cfg.XBLOCK, cfg.num_warps) == (min(expected[0], 1 << (g.numel - 1).bit_length()), expected[1])


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_a_half_precision_pool_feeds_its_consumer_in_float32(pool, device):
    """A pooled bf16 value reaches the op after it in float32 and is rounded once, at the store, as
    every lazy value is (an op on a bf16 value itself: Triton's interpreter negated its bits)."""
    x = rand((2, 3, 8, 9), torch.bfloat16, device=device)
    fn = (lambda x: -F.max_pool2d(x, 2)) if pool == "max" else (lambda x: -F.avg_pool2d(x, 3, 2, 1))
    f, rec = _compiled(fn, x)
    with torch.no_grad():
        assert_close(f(x), fn(x))
    (kernel,) = _kernels(rec)
    assert "_to_bf16(" not in kernel.source.split("tl.store")[0].split("def triton_")[-1]


def test_a_sum_over_pooled_positions_reads_along_the_rows_on_the_gpu():
    """A sum over the channels and pooled positions of each image reads its row two elements apart:
    its lanes run along r (as a row reduction's), not along the images, each of which lies a whole
    image away (such a config ran at 1.66x torch.compile's time on the H200)."""
    from autofuse import CompileOptions
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import default_config, schedule
    from autofuse.schedule.fusion import is_outer_reduction
    x = rand((16, 8, 50, 46), device="cpu")
    fn = lambda t: torch.sigmoid(F.max_pool2d(t, 2)).sum((1, 2, 3), keepdim=True)  # noqa: E731
    sched = schedule(trace_aten(fn, [x]), [x], CompileOptions(strict=True, use_db=False))
    (g,) = [g for g in sched.groups if not g.is_extern]
    cfg = default_config(g, Heuristics(), interpret=False)
    assert not is_outer_reduction(g) and cfg.XBLOCK == 1 and cfg.RBLOCK >= 512, cfg
    f, _ = _compiled(fn, x)
    with torch.no_grad():
        assert_close(f(x), fn(x))


ADAPTIVE = [((13, 11), (7, 7)), ((14, 12), (7, 4)), ((5, 6), (7, 9)), ((9, 10), (2, 3))]


@pytest.mark.parametrize("sizes", ADAPTIVE, ids=lambda s: f"{s[0]}-to-{s[1]}")
def test_adaptive_pools_in_one_kernel(sizes, device):
    """Adaptive average and max pooling (windows of varying lengths where the sizes do not divide,
    overlapping ones where the output is larger) after a pointwise op, one kernel each; max
    pooling's indices equal eager's."""
    (h, w), out = sizes
    x = rand((2, 3, h, w), device=device)
    x[0, 1, 2, 3] = float("nan")
    x[1, 0] = x[1, 0].round()   # ties
    _assert_one_pooling_kernel(lambda x: F.adaptive_avg_pool2d(torch.relu(x) - 0.5, out), x, "adaptive_avg_pool2d")
    _assert_one_pooling_kernel(lambda x: F.adaptive_max_pool2d(torch.tanh(x), out), x, "adaptive_max_pool2d")
    f, _ = _compiled(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), x)
    with torch.no_grad():
        got, want = f(x), F.adaptive_max_pool2d(x, out, return_indices=True)
    assert_close(got[0], want[0])
    assert torch.equal(got[1], want[1])


def test_adaptive_3d_pools_and_training(device):
    """3-D adaptive pools; a training step through adaptive max pooling (its indices generated, its
    backward ATen's kernel reading them) gives eager's gradients."""
    x = rand((2, 3, 5, 6, 7), device=device)
    _assert_one_pooling_kernel(lambda x: F.adaptive_avg_pool3d(x * 2, (3, 3, 4)), x, "adaptive_avg_pool3d")
    _assert_one_pooling_kernel(lambda x: F.adaptive_max_pool3d(x * 2, (2, 4, 3)), x, "adaptive_max_pool3d")
    y = rand((2, 4, 9, 10), device=device).requires_grad_()
    fn = lambda y: F.adaptive_max_pool2d(torch.tanh(y) * 3, (4, 3))  # noqa: E731
    with torch.no_grad():
        g = rand(tuple(fn(y).shape), device=device)
    kernels = _max_pool_step(fn, y, g)
    assert any("adaptive_max_pool2d" in k.aten_ops for k in kernels if k.kind == "pointwise")


def test_long_adaptive_windows_keep_atens_kernel(device):
    """A window of more than ADAPTIVE_WINDOW_MAX elements (a 13 x 13 plane pooled to 2 x 2: 7 x 7)
    runs ATen's kernel, still correct."""
    x = rand((2, 3, 13, 13), device=device)
    f, rec = _compiled(lambda x: F.adaptive_max_pool2d(torch.relu(x), 2), x)
    with torch.no_grad():
        assert_close(f(x), F.adaptive_max_pool2d(torch.relu(x), 2))
    assert any(k.kind == "fallback" for k in _kernels(rec))


@pytest.mark.parametrize("pool", ["max", "avg3"])
def test_a_pooled_value_several_consumers_read_is_computed_once(pool, device):
    """A window read by several kernels (DenseNet's stem pool, concatenated into every layer of a
    block) is stored once: counted by its loads, as Inductor counts them, it passes the realize
    threshold; recomputed in each consumer, each would read the whole window again."""
    x = rand((2, 6, 17, 19), device=device)
    w = rand((6, 6, 1, 1), device=device)

    def fn(x, w):
        p = F.max_pool2d(torch.relu(x), 3, 2, 1) if pool == "max" else F.avg_pool2d(torch.relu(x), 3, 2, 1)
        a = F.conv2d(torch.cat([p, p * 2.0], 1)[:, :6], w)
        return torch.cat([p, a], 1).sigmoid(), (torch.cat([p, a, a], 1) - 1.0).relu()

    f, rec = _compiled(fn, x, w)
    with torch.no_grad():
        assert_close(f(x, w), fn(x, w))
    op = "max_pool2d" if pool == "max" else "avg_pool2d"
    assert [op in k.aten_ops for k in _kernels(rec)].count(True) == 1
