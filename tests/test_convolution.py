"""Convolutions: the extern call in channels-last layout, bias and epilogues fused after it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import autofuse

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from autofuse.lower.convolution import channels_last_strides
from autofuse.schedule.heuristics import Heuristics

from . import helpers
from .helpers import assert_close, kernels_of, rand

LAYOUTS = ["channels_last", "as_given"]


def _compile(fn, args, layout: str):
    options = CompileOptions(poison=True, strict=True, use_db=False, heuristics=Heuristics(conv_layout=layout))
    return compile_traced(fn, args, options)


@pytest.fixture(autouse=True)
def _no_tf32():
    """cuDNN picks other algorithms for other layouts; with TF32 their results differ by ~1e-3."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


def _check(fn, args, layout: str, **tol) -> list:
    """Compiled against eager. ATen's CPU convolution sums in an order that depends on the layout and
    the CPU's vector width, so an output that cancels to near zero carries a rounding of the size of
    its terms: the absolute tolerance scales with the largest output unless one is given."""
    compiled = _compile(fn, args, layout)
    expected = fn(*args)
    actual = compiled(*args)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    actual = list(actual)
    for a, e in zip(actual, expected):
        atol = tol.get("atol", max(1e-5, 1e-6 * e.abs().max().item()) if e.dtype == torch.float32 else None)
        assert_close(a, e, **{**tol, "atol": atol})
    assert len(actual) == len(expected)
    return kernels_of(compiled)


def test_channels_last_strides():
    assert channels_last_strides((2, 3, 4, 5)) == (60, 1, 15, 3)
    assert channels_last_strides((2, 3, 4, 5, 6)) == (360, 1, 90, 18, 3)
    assert torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last).stride() == (60, 1, 15, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_bias_epilogue_fused(layout):
    x, w, b = rand((2, 5, 9, 11)), rand((6, 5, 3, 3)), rand((6,))

    def fn(x, w, b):
        return torch.relu(F.conv2d(x, w, b, padding=1) * 0.5 + 1.0)

    kernels = _check(fn, (x, w, b), layout)
    externs = [k for k in kernels if k.kind == "fallback"]
    assert len(externs) == 1
    epilogue = [k for k in kernels if "relu" in k.aten_ops]
    assert len(epilogue) == 1 and "convolution" in epilogue[0].aten_ops  # the bias add rides along


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", ["strided_dilated", "grouped", "no_bias", "noncontig", "conv3d", "transposed", "conv1d"])
def test_conv_variants(layout, case):
    if case == "strided_dilated":
        args = (rand((3, 4, 13, 10)), rand((7, 4, 3, 2)), rand((7,)))
        fn = lambda x, w, b: torch.sigmoid(F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(2, 1)))
    elif case == "grouped":
        args = (rand((2, 6, 7, 7)), rand((9, 2, 3, 3)), rand((9,)))
        fn = lambda x, w, b: F.conv2d(x, w, b, groups=3) - 2.0
    elif case == "no_bias":
        args = (rand((2, 5, 8, 6)), rand((3, 5, 1, 1)))
        fn = lambda x, w: torch.tanh(F.conv2d(x, w))
    elif case == "noncontig":
        args = (rand((2, 5, 9, 7), noncontig=True), rand((4, 5, 3, 3)), rand((4,)))
        fn = lambda x, w, b: F.conv2d(x, w, b) * 3.0
    elif case == "conv3d":
        args = (rand((2, 3, 5, 6, 7)), rand((4, 3, 3, 3, 3)), rand((4,)))
        fn = lambda x, w, b: torch.relu(F.conv3d(x, w, b, padding=1))
    elif case == "transposed":
        args = (rand((2, 6, 5, 7)), rand((6, 3, 4, 4)), rand((3,)))
        fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1) + 1.0
    else:
        args = (rand((2, 4, 17)), rand((5, 4, 3)), rand((5,)))
        fn = lambda x, w, b: F.conv1d(x, w, b, padding=2) * 2.0
    _check(fn, args, layout)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_conv_low_precision(dtype):
    if dtype == torch.float16:
        try:
            F.conv2d(torch.ones(1, 1, 3, 3, dtype=dtype), torch.ones(1, 1, 1, 1, dtype=dtype))
        except RuntimeError:
            pytest.skip("no half convolution on this CPU build")
    x, w, b = rand((2, 4, 8, 9), dtype), rand((5, 4, 3, 3), dtype), rand((5,), dtype)
    _check(lambda x, w, b: F.gelu(F.conv2d(x, w, b, padding=1)), (x, w, b), "channels_last", atol=0.1, rtol=0.05)


def test_chain_copies_each_value_once():
    """A value read by two convolutions is made channels-last once; the epilogue between two
    convolutions writes the channels-last copy the next one reads."""
    x = rand((2, 4, 10, 10))
    w1, b1, w2, w3 = rand((6, 4, 3, 3)), rand((6,)), rand((5, 6, 1, 1)), rand((3, 6, 3, 3))

    def fn(x, w1, b1, w2, w3):
        y = torch.relu(F.conv2d(x, w1, b1, padding=1))
        return F.conv2d(y, w2), F.conv2d(y, w3, padding=1), F.conv2d(x, w1)

    kernels = _check(fn, (x, w1, b1, w2, w3), "channels_last")
    writers = [k for k in kernels if k.kind != "fallback" and "relu" in k.aten_ops]
    assert len(writers) == 1 and len(writers[0].writes) == 1


def test_training_step_grads():
    """Forward and backward graphs with channels-last convolutions match eager's loss and grads."""
    torch.manual_seed(0)
    x = rand((2, 3, 7, 6))
    conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(x.device)
    model = torch.nn.Sequential(conv, torch.nn.ReLU())
    compiled = autofuse.compile(model, strict=True, use_db=False, heuristics=Heuristics(conv_layout="channels_last"))
    loss = compiled(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(x).square().mean()
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-5)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-5)


def test_layout_choice():
    """The default ("auto"): channels-last on CUDA for floating point where Inductor's rule would."""
    from autofuse.lower.conv_layout import ConvSite
    auto = Heuristics()
    assert auto.conv_layout == "auto"
    small = ConvSite((64, 64, 3, 3), 1, 1e9)
    cuda, f32 = torch.device("cuda"), torch.float32
    assert auto.conv_channels_last(cuda, f32, [small], graph_nodes=10)              # a lone convolution too
    assert not auto.conv_channels_last(cuda, f32, [small], graph_nodes=300)         # one per 300 nodes: too few
    assert not auto.conv_channels_last(torch.device("cpu"), f32, [small], graph_nodes=10)
    assert not auto.conv_channels_last(cuda, torch.int64, [small], graph_nodes=10)
    assert not auto.conv_channels_last(cuda, f32, [], graph_nodes=10)
    assert not Heuristics(conv_layout="as_given").conv_channels_last(cuda, f32, [small], graph_nodes=10)
    assert Heuristics(conv_layout="channels_last").conv_channels_last(cuda, f32)


def test_inductor_layout_rule():
    """Inference weighs each class's multiply-adds by its channels-last time ratio; training skips
    channels-last for any grouped or narrowing convolution, or when all are small."""
    from autofuse.lower.conv_layout import ConvSite, channels_last_pays
    ratio = dict(Heuristics().conv_cl_time_ratio)
    grouped, depthwise = ConvSite((256, 32, 3, 3), 8, 1e9), ConvSite((256, 1, 3, 3), 256, 1e8)
    small, wide, narrowing = ConvSite((64, 3, 7, 7), 1, 1e9), ConvSite((256, 256, 3, 3), 1, 1e9), ConvSite((128, 512, 3, 3), 1, 1e9)
    assert (grouped.kind, depthwise.kind, small.kind, wide.kind, narrowing.kind) == (
        "grouped", "default", "small", "default", "in_out")
    assert ConvSite((128, 512, 1, 1), 1, 1.0).kind == "default"   # a 1x1 kernel does not count as narrowing

    def pays(sites, training):
        return channels_last_pays(sites, 20, training, ratio, 300)
    assert pays([grouped, ConvSite((256, 256, 3, 3), 1, 3e9)], False)   # 1.358 + 3 * 0.823 <= 4
    assert not pays([grouped, wide], False)                             # 1.358 + 0.823 > 2
    assert not pays([grouped], False) and not pays([grouped, small], False)   # 1.358, then (1.358 + 0.783) / 2
    assert not pays([ConvSite((256, 32, 3, 3), 8, 9e9), wide], False)   # grouped multiply-adds dominate
    assert pays([depthwise], False) and pays([small], False) and pays([narrowing], False)
    assert pays([wide, small], True) and pays([depthwise, wide], True)
    assert not pays([small], True) and not pays([wide, narrowing], True) and not pays([grouped, wide], True)


def test_conv_sites_and_training_graphs():
    """Sites come from the graph's fake values; AOTAutograd's training graphs are told apart."""
    from autofuse.lower.conv_layout import conv_sites, is_training_graph
    _, gm, _ = _conv_gm()
    (site,) = conv_sites(gm)
    assert site.weight == (4, 3, 3, 3) and site.groups == 1 and site.macs == 2 * 4 * 6 * 5 * 27
    assert not is_training_graph(gm)
    graphs = {}

    def backend(label):
        def compile_(g, args):
            graphs[label] = g
            return g
        return compile_
    from torch._dynamo.backends.common import aot_autograd
    torch._dynamo.reset()
    conv = torch.nn.Conv2d(3, 4, 3).to(helpers.DEFAULT_DEVICE)
    be = aot_autograd(fw_compiler=backend("forward"), bw_compiler=backend("backward"),
                      inference_compiler=backend("inference"))
    torch.compile(conv, backend=be)(rand((2, 3, 8, 8))).sum().backward()
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(conv, backend=be)(rand((2, 3, 8, 8)))
    assert is_training_graph(graphs["forward"]) and is_training_graph(graphs["backward"])
    assert not is_training_graph(graphs["inference"])


def _conv_gm():
    from autofuse.capture.trace import trace_aten
    x, w, b = rand((2, 3, 6, 5)), rand((4, 3, 3, 3)), rand((4,))
    fn = lambda x, w, b: torch.relu(F.conv2d(x, w, b, padding=1))
    return fn, trace_aten(fn, (x, w, b)), (x, w, b)


def test_plan_records_layout_and_search_can_change_it():
    from autofuse.compiler import compile_graph
    from autofuse.plan.plan import FusionPlan, PlanError
    from autofuse.search.study import SpaceCache

    fn, gm, args = _conv_gm()
    expected = fn(*args)
    plans = {}
    for layout in LAYOUTS:
        opts = CompileOptions(strict=True, use_db=False, heuristics=Heuristics(conv_layout=layout))
        plans[layout] = compile_graph(gm, args, opts).plan
        assert plans[layout].conv_layout == layout
        again = FusionPlan.from_json(plans[layout].to_json())
        assert again == plans[layout]
    # a plan's layout wins over the heuristics it is applied with
    for layout, plan in plans.items():
        other = "as_given" if layout == "channels_last" else "channels_last"
        opts = CompileOptions(strict=True, use_db=False, heuristics=Heuristics(conv_layout=other),
                              plan={plan.graph_key: plan})
        arts = compile_graph(gm, args, opts)
        assert arts.plan.conv_layout == layout
        assert_close(arts.program(list(args))[0], expected)
    bad = dict(plans["as_given"].to_json(), conv_layout="nhwc")
    with pytest.raises(PlanError, match="conv_layout"):
        FusionPlan.from_json(bad)

    spaces = SpaceCache(gm, args, Heuristics())
    assert spaces.has_conv
    params = spaces.params_of(plans["channels_last"])
    assert params["conv_layout"] == "channels_last"
    n_cl = len(spaces.space({}, "channels_last").nodes)
    assert n_cl > len(spaces.space({}, "as_given").nodes)  # the layout copies are nodes of their own


def test_attention_bias_rows_padded_for_aligned_kernels():
    """CUDA's memory-efficient attention needs its mask's strides in multiples of 16 elements."""
    from autofuse.lower.extern_args import is_aligned, padded_layout
    lay = padded_layout(torch.device("cpu"), torch.float32, (2, 1, 11, 11))
    assert lay.stride == (176, 176, 16, 1) and is_aligned(lay)
    from autofuse.ir.values import Layout
    assert not is_aligned(Layout.contiguous(torch.device("cpu"), torch.float32, (2, 1, 11, 11)))
    assert is_aligned(Layout.contiguous(torch.device("cpu"), torch.float32, (2, 4, 16, 32)))


class _Block(torch.nn.Module):
    """A residual block as in ResNet: conv-BN-ReLU twice, the identity added, a max pool after."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.c2, self.b2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.c3, self.b3 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.head = torch.nn.Linear(c, 5)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + x)
        y = F.max_pool2d(y, 2)
        y = torch.relu(self.b3(self.c3(y)))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1)), y


def test_channels_last_chain_keeps_activations_channels_last():
    """Between convolutions every activation (BN-ReLU results, the residual sum, the max pool's
    result) is channels-last; the returned activation comes back in eager's strides."""
    from autofuse.capture.constants import lift_constants
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import schedule
    torch.manual_seed(0)
    x = rand((2, 6, 10, 9))
    model = _Block(6).eval().to(x.device)
    with torch.no_grad():
        expected = model(x)
        fn = lambda x: model(x)
        compiled = _compile(fn, (x,), "channels_last")
        assert_close(list(compiled(x)), list(expected), atol=1e-4, rtol=1e-4)
        options = CompileOptions(strict=True, use_db=False, heuristics=Heuristics(conv_layout="channels_last"))
        gm = trace_aten(fn, (x,))
        lowering = schedule(gm, (x, *lift_constants(gm)), options).lowering
    returned = {getattr(o, "name", None) or o.buffer.name for o in lowering.outputs}
    four_d = [lay for name, lay in lowering._layouts_by_name().items()
              if len(lay.size) == 4 and lay.size[1] == 6 and not name.startswith("arg") and name not in returned]
    assert four_d and all(all(st == want or n == 1 for st, want, n in zip(lay.stride, channels_last_strides(lay.size), lay.size))
                          for lay in four_d), \
        [(lay.size, lay.stride) for lay in four_d]


def test_training_step_keeps_saved_activations_channels_last():
    """A training forward graph hands the activations it saves for the backward graph over in the
    layout it computed them in (no copy back to eager's strides), and the backward graph is
    compiled for them; loss, grads and BatchNorm's running stats match eager."""
    torch.manual_seed(0)
    x = rand((2, 6, 10, 9))
    model = _Block(6).to(x.device).train()
    ref_model = _Block(6).to(x.device).train()
    ref_model.load_state_dict(model.state_dict())
    compiled = autofuse.compile(model, strict=True, use_db=False, heuristics=Heuristics(conv_layout="channels_last"))
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits, y = compiled(x)
    (logits.square().mean() + y.mean()).backward()
    ref_logits, ref_y = ref_model(x)
    (ref_logits.square().mean() + ref_y.mean()).backward()
    assert_close([logits, y], [ref_logits, ref_y], atol=1e-4, rtol=1e-4)
    assert y.stride() == ref_y.stride()  # an activation the model returns keeps eager's strides
    for p, q in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    for b, c in zip(model.buffers(), ref_model.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-4)
    # the 4-D tensors saved other than the input and the weights: activations the forward computed
    activations = [t for t in saved if t.dim() == 4 and t.shape[0] == 2 and t.data_ptr() != x.data_ptr()]
    assert len(activations) >= 6
    assert all(t.stride() == channels_last_strides(tuple(t.shape)) for t in activations), \
        [(tuple(t.shape), t.stride()) for t in activations]


@pytest.mark.parametrize("norm", ["batch", "group", "instance"])
def test_norm_and_silu_after_a_convolution_share_one_kernel(norm):
    """A convolution's norm + SiLU returned as the graph's activation: the norm's result is computed
    in the order its NCHW-writing consumer iterates ("auto" loop order), so both share one kernel
    (in memory order they ran as two, the norm's result stored channels-last in between)."""
    torch.manual_seed(0)
    x = rand((3, 5, 11, 9))
    norms = {"batch": torch.nn.BatchNorm2d(6), "group": torch.nn.GroupNorm(2, 6),
             "instance": torch.nn.InstanceNorm2d(6, affine=True)}
    model = torch.nn.Sequential(torch.nn.Conv2d(5, 6, 3), norms[norm], torch.nn.SiLU()).eval().to(x.device)
    counts = {}
    for loops in ("auto", "memory"):
        options = CompileOptions(poison=True, strict=True, use_db=False,
                                 heuristics=Heuristics(conv_layout="channels_last", channels_last_loops=loops))
        with torch.no_grad():
            compiled = compile_traced(model, (x,), options)
            out = compiled(x)
            expected = model(x)
        assert_close(list(out), [expected], atol=1e-4, rtol=1e-4)
        counts[loops] = [k for k in kernels_of(compiled) if k.kind != "fallback" and "sigmoid" in k.aten_ops]
    # the kernel that applies the SiLU reads the convolution's output itself: the normalization
    # joined it (in memory order a BatchNorm's result is stored between them)
    assert len(counts["auto"]) == 1 and {"convolution", "sigmoid"} <= set(counts["auto"][0].aten_ops)
    if norm == "batch":
        assert not any("convolution" in k.aten_ops for k in counts["memory"])


def test_activations_between_convolutions_keep_memory_order():
    """A graph that returns no 4-D activation (logits only) computes every channels-last value in
    memory order: 1-D kernels, no 2-D tiles."""
    torch.manual_seed(0)
    x = rand((2, 6, 10, 9))
    block = _Block(6).eval().to(x.device)
    with torch.no_grad():
        compiled = _compile(lambda x: block(x)[0], (x,), "channels_last")
        assert_close(list(compiled(x)), [block(x)[0]], atol=1e-4, rtol=1e-4)
    between = [k for k in kernels_of(compiled) if k.kind == "pointwise" and "relu" in k.aten_ops]
    assert between and all(not k.config.YBLOCK for k in between), [k.config for k in between]


class _ResBlock(torch.nn.Module):
    """A diffusion U-Net's residual block: GroupNorm, SiLU, conv, the time embedding added per
    channel, GroupNorm, SiLU, conv, the input added."""

    def __init__(self, c: int, groups: int, t: int) -> None:
        super().__init__()
        self.n1, self.c1 = torch.nn.GroupNorm(groups, c), torch.nn.Conv2d(c, c, 3, padding=1)
        self.n2, self.c2 = torch.nn.GroupNorm(groups, c), torch.nn.Conv2d(c, c, 3, padding=1)
        self.emb = torch.nn.Linear(t, c)

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.emb(F.silu(temb))[:, :, None, None]
        return x + self.c2(F.silu(self.n2(h)))


def test_a_convolution_operand_iterates_as_the_buffer_it_reads():
    """The second convolution's operand, SiLU of a group norm over the first convolution's output:
    the norm's result is stored in memory order (N, H, W, C), so the operand's copy iterates in that
    order too and both share one kernel; in logical order (the block's output is returned, so the
    copy at the last convolution took the returned activation's order) they ran as two."""
    torch.manual_seed(0)
    x, temb = rand((2, 6, 7, 9)), rand((2, 11))
    block = _ResBlock(6, 3, 11).eval().to(x.device)
    with torch.no_grad():
        compiled = _compile(block, (x, temb), "channels_last")
        assert_close(list(compiled(x, temb)), [block(x, temb)], atol=1e-4, rtol=1e-4)
    silu = [k for k in kernels_of(compiled) if k.kind == "pointwise" and "sigmoid" in k.aten_ops
            and "convolution" in k.aten_ops]
    assert len(silu) == 1 and {"add", "mul"} <= set(silu[0].aten_ops), [k.aten_ops for k in kernels_of(compiled)]


@pytest.mark.parametrize("bias", [True, False])
def test_a_1d_convolution_operand_computed_here_is_stored_row_major(bias):
    """A GLU of a transposed activation (a Conformer's convolution module) has eager's transposed
    strides; stored for a 1-D convolution it is row-major, the layout ATen's depthwise kernel reads
    without copying it first."""
    y = torch.randn(2, 11, 12)          # (batch, time, channels)
    w = torch.randn(6, 1, 3)
    b = torch.randn(6) if bias else None

    def fn(y, w, b):
        return F.conv1d(F.glu(y.transpose(1, 2), dim=1), w, b, padding=1, groups=6)

    out = compile_traced(fn, [y, w, b], CompileOptions(strict=True, poison=True, use_db=False))
    helpers.assert_close(out(y, w, b)[0], fn(y, w, b))
    report = autofuse.explain(fn, (y, w, b))
    glu = [k for k in report.kernels if "sigmoid" in k.aten_ops]
    stores = [line.strip() for line in glu[0].source.splitlines() if "tl.store" in line]
    assert stores == ["tl.store(out_ptr0 + ((xindex + (11 * yindex))), tmp3, xmask)"]   # time innermost
