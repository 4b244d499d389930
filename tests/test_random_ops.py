"""Random numbers drawn inside the generated kernels (capture/random_ops.py): dropout and rand."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import autofuse
from autofuse.api import Recorder
from autofuse.capture.random_ops import generate_random, philox_normal, philox_uniform
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.lower.graph import SAVED_FROM
from autofuse.options import CompileOptions
from tests.helpers import assert_close, rand


def _compile(fn, rec=None, **kw):
    torch._dynamo.reset()
    return autofuse.compile(fn, strict=True, use_db=False, recorder=rec, **kw)


def _aten_ops(rec: Recorder) -> list[str]:
    """Every op name of every kernel, generated or fallback, of the recorded graphs."""
    return [o for _, _, arts in rec.graphs for k in arts.kernels for o in k.aten_ops]


def _externs(rec: Recorder) -> list[str]:
    return [o for _, _, arts in rec.graphs for k in arts.kernels if k.kind == "fallback" for o in k.aten_ops]


def test_the_reference_draws_known_values():
    """A fixed seed draws fixed numbers (a change of the stream would change every user's draws
    under one seed), uniform over [0, 1)."""
    u = philox_uniform(torch.tensor(0), 4)
    assert u.tolist() == [0.7980929017066956, 0.055517591536045074, 0.03889884054660797, 0.4252644181251526]
    big = philox_uniform(torch.tensor(-(2 ** 63)), 100_000)
    assert abs(big.mean().item() - 0.5) < 0.005 and abs(big.var().item() - 1 / 12) < 0.002
    assert big.min() >= 0 and big.max() < 1


@pytest.mark.parametrize("shape", [(1,), (37, 129), (3, 5, 7)])
def test_generated_draws_equal_the_eager_op(device, shape):
    """The kernel's draws are the op's eager numbers bit for bit, whatever the layout of what they
    are combined with (a transposed operand here)."""
    seed = torch.tensor(-(2 ** 62) + 11, dtype=torch.int64, device=device)
    x = rand(shape[::-1], device=device).t() if len(shape) == 2 else rand(shape, device=device)

    def fn(seed, x):
        return x * 2 + torch.ops.autofuse.philox_rand(seed, x)

    rec = Recorder()
    got = _compile(fn, rec)(seed, x)
    assert torch.equal(got, fn(seed, x))
    assert not _externs(rec) and "philox_rand" in _aten_ops(rec)


def test_dropout_is_drawn_in_the_fused_kernel(device):
    """A training dropout after a pointwise op and before another is one kernel with them (besides
    the one draw of the seeds); a fraction p is dropped, the backward drops the same
    elements, the same seed draws the same mask and the next call another one."""
    def fn(x, w):
        return F.dropout(torch.tanh(x * w), p=0.3, training=True) * 3.0

    x = rand((64, 129), device=device).requires_grad_()
    w = rand((129,), device=device)
    rec = Recorder()
    f = _compile(fn, rec)
    torch.manual_seed(1)
    y = f(x, w)
    g = rand(tuple(y.shape), device=device)
    y.backward(g)
    kept = y != 0
    assert 0.27 < 1 - kept.float().mean().item() < 0.33
    t = torch.tanh(x.detach() * w)
    assert_close(y, torch.where(kept, t / 0.7 * 3.0, 0.0))
    assert_close(x.grad, torch.where(kept, g * 3.0 / 0.7 * (1 - t * t) * w, 0.0))
    torch.manual_seed(1)
    assert torch.equal(f(x, w), y)
    assert not torch.equal(f(x, w), y)
    label, gm, forward = rec.graphs[0]
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    assert label == "forward" and SAVED_FROM in output.meta   # the rewritten copy keeps the saved-activation mark
    generated = [k for k in forward.kernels if k.kind != "fallback"]
    assert _externs(rec) == ["seeds"], _externs(rec)
    assert len(generated) == 1 and {"philox_rand", "tanh"} <= set(generated[0].aten_ops)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_dropout_keeps_the_dtype_and_scales_once(device, dtype):
    x = rand((33, 70), dtype=dtype, device=device)
    rec = Recorder()
    with torch.enable_grad():
        y = _compile(lambda x: F.dropout(x, p=0.25, training=True), rec)(x.requires_grad_())
    kept = y != 0
    assert y.dtype == dtype
    assert_close(y, torch.where(kept, x.detach().double() * (1 / 0.75), 0).to(dtype))
    assert "native_dropout" not in _aten_ops(rec)


def test_dropout_with_p_zero_keeps_everything_and_p_one_is_atens(device):
    x = rand((17, 9), device=device)
    rec = Recorder()
    assert torch.equal(_compile(lambda x: F.dropout(x, p=0.0, training=True), rec)(x), x)
    assert "native_dropout" not in _aten_ops(rec)
    rec = Recorder()
    y = _compile(lambda x: F.dropout(x * 2, p=1.0, training=True) + 1, rec)(x)
    assert torch.equal(y, torch.ones_like(x)) and _externs(rec) == ["native_dropout"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rand_like_is_uniform_and_fused(device, dtype):
    x = rand((101, 103), dtype=dtype, device=device)
    rec = Recorder()
    u = _compile(lambda x: torch.rand_like(x) + x * 0, rec)(x)
    assert u.dtype == dtype and 0 <= u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.02
    assert _externs(rec) == ["seeds"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_randn_like_is_normal_and_fused(device, dtype):
    x = rand((211, 97), dtype=dtype, device=device)
    rec = Recorder()
    z = _compile(lambda x: x + torch.randn_like(x) * 0.5, rec)(x)
    n = ((z - x).float() * 2).double()
    assert z.dtype == dtype and abs(n.mean().item()) < 0.03 and abs(n.std().item() - 1) < 0.03
    assert _externs(rec) == ["seeds"]


def test_generated_normal_draws_are_the_eager_ops(device):
    seed = torch.tensor(77, dtype=torch.int64, device=device)

    def fn(seed, x):
        return x - torch.ops.autofuse.philox_randn(seed, x)
    x = rand((45, 67), device=device)
    assert_close(_compile(fn)(seed, x), fn(seed, x), atol=2e-5, rtol=1e-5)
    z = philox_normal(torch.tensor(5), 200_000)
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 1) < 0.01 and z.abs().max() < 6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exponential_and_scaled_normal_draws(device, dtype):
    """`exponential_(2)` (mean and spread 1/2, never negative), `normal_(1, 0.3)` and `normal(x, 0.1)`
    drawn in the kernel, in the op's dtype; gumbel_softmax's rows still sum to 1."""
    x = rand((3000, 7), dtype=dtype, device=device)
    rec = Recorder()
    e, n, m, gs = _compile(lambda x: (torch.empty_like(x).exponential_(2.0), torch.empty_like(x).normal_(1.0, 0.3),
                                       torch.normal(x, 0.1) - x, F.gumbel_softmax(x.float(), tau=0.5)), rec)(x)
    assert e.dtype == n.dtype == m.dtype == dtype and e.min() >= 0
    for t, mean, std in ((e, 0.5, 0.5), (n, 1.0, 0.3), (m, 0.0, 0.1)):
        t = t.double()
        assert abs(t.mean().item() - mean) < 0.02 and abs(t.std().item() - std) < 0.02
    assert_close(gs.sum(-1), torch.ones(3000, device=device))
    assert _externs(rec) == ["seeds"]


def test_half_precision_rand_stays_atens(device):
    """A half-precision draw rounded from f32 could reach 1.0: ATen draws those."""
    rec = Recorder()
    u = _compile(lambda x: torch.rand_like(x) * 2, rec)(rand((20, 30), dtype=torch.bfloat16, device=device))
    assert u.dtype == torch.bfloat16 and _externs(rec) == ["rand_like"]
    assert 0 <= u.min() and u.max() <= 2


def test_fallback_random_keeps_atens_draws(device):
    """With fallback_random the dropout is ATen's op and draws what eager draws (on the CPU; CUDA's
    compiled graphs advance the generator differently, as under Inductor)."""
    def fn(x):
        return F.dropout(x + 1, p=0.4, training=True)
    x = rand((50, 41), device=device)
    rec = Recorder()
    f = _compile(fn, rec, fallback_random=True)
    torch.manual_seed(4)
    got = f(x)
    assert "native_dropout" in _externs(rec)
    if device == "cpu":
        torch.manual_seed(4)
        assert torch.equal(got, fn(x))


def _dropout(x, p=0.5):
    return torch.ops.aten.native_dropout(x, p, True)


CONTEXTS = {
    # the dropout's mask and values as graph outputs, in kernels of every kind around it
    "pointwise": (lambda x: (_dropout(torch.sigmoid(x))[0] * 2, _dropout(torch.sigmoid(x))[1], torch.rand_like(x)),
                  (31, 47)),
    "transposed input": (lambda x: _dropout(x.t() * 3), (40, 23)),
    "before a row sum": (lambda x: _dropout(x, 0.3)[0].sum(-1), (37, 300)),
    "before a column sum": (lambda x: _dropout(x, 0.3)[0].sum(0), (300, 37)),
    "after a softmax": (lambda x: _dropout(torch.softmax(x, -1), 0.1), (19, 129)),
    "long rows (looped)": (lambda x: _dropout(x - x.mean(-1, keepdim=True), 0.2), (5, 5000)),
    "of a view": (lambda x: _dropout(x.view(6, 35, 4).permute(2, 0, 1), 0.4), (42, 20)),
    "normal draws": (lambda x: x * torch.randn_like(x) + torch.rand_like(x.t()).t(), (33, 18)),
    "gumbel and scaled normal": (lambda x: (F.gumbel_softmax(x, tau=0.5), torch.normal(x, 0.1),
                                            torch.empty_like(x).normal_(1.0, 0.3)), (29, 11)),
}


@pytest.mark.parametrize("context", list(CONTEXTS))
def test_the_rewritten_graph_run_eagerly_is_the_compiled_program(device, context):
    """What the tuner compares candidates with: the graph run op by op, from one generator state,
    gives the compiled program's masks and draws bit for bit and its values within rounding,
    wherever the draw sits (inside a reduction's loop, a transposed or permuted iteration, a view)."""
    fn, shape = CONTEXTS[context]
    x = rand(shape, device=device)
    gm = generate_random(trace_aten(fn, [x]))
    targets = {str(n.target) for n in gm.graph.nodes}
    assert "aten.native_dropout.default" not in targets and "aten.rand_like.default" not in targets
    arts = compile_graph(gm, [x], CompileOptions(strict=True, use_db=False))
    assert not [o for k in arts.kernels if k.kind == "fallback" for o in k.aten_ops if o != "seeds"]
    torch.manual_seed(9)
    eager = gm(x)
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    torch.manual_seed(9)
    got = arts.program([x])
    assert len(got) == len(eager)
    for a, e in zip(got, eager):
        if a.dtype == torch.bool:
            assert torch.equal(a, e)
        else:
            assert torch.equal(a != 0, e != 0)
            assert_close(a, e, atol=2e-5, rtol=1e-5)


def test_a_graph_of_symbolic_sizes_draws_in_its_kernels(device):
    """Sizes Dynamo made symbolic (a second batch size): each size's program draws in its kernels,
    the draw sized by the tensor it is drawn for."""
    torch._dynamo.reset()
    rec = Recorder()
    f = torch.compile(lambda x: F.dropout(x * 2, 0.5, training=True) + torch.randn_like(x) * 0, backend="autofuse",
                      dynamic=True, options={"strict": True, "use_db": False, "recorder": rec})
    for n in (5, 9, 13):
        x = rand((n, 7), device=device)
        y = f(x)
        kept = y != 0
        assert y.shape == (n, 7) and 0 < kept.float().mean().item() < 1
        assert_close(y, torch.where(kept, x * 4, 0.0))
    assert _externs(rec) == ["seeds"] * 3 and "native_dropout" not in _aten_ops(rec)


def test_the_dropouts_of_repeated_layers_compile_to_one_source(device):
    """Each random op reads its own 0-d seed at offset 0: two layers alike give one kernel source
    (one compile, one tuning), not one per dropout."""
    def fn(x, a, b):
        y = F.dropout(torch.relu(x * a), 0.2, True)
        return F.dropout(torch.relu((y @ b) * a), 0.2, True)
    x, a, b = rand((16, 32), device=device), rand((32,), device=device), rand((32, 32), device=device)
    rec = Recorder()
    _compile(fn, rec)(x, a, b)
    (_, _, arts), = rec.graphs
    sources = [k.source for k in arts.kernels if k.kind != "fallback"]
    assert len(sources) == 2 and sources[0] == sources[1]


@pytest.mark.gpu
def test_measuring_the_copy_bandwidth_leaves_the_generator_alone():
    """The first compile that autotunes measures the copy bandwidth: a seeded step after it must
    draw what it draws without it."""
    from autofuse.measure.timing import copy_bandwidth
    torch.manual_seed(3)
    before = torch.cuda.get_rng_state()
    assert copy_bandwidth("cuda", nbytes=2 ** 20, reps=2) > 0
    assert torch.equal(torch.cuda.get_rng_state(), before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_stochastic_depth_draws_in_the_kernel(device, dtype):
    """torchvision's stochastic depth: `empty(n, 1).bernoulli_(keep)`, divided by keep, times the
    branch: each sample's branch kept whole or dropped whole, with probability keep."""
    def fn(x):
        noise = torch.empty((x.shape[0], 1), dtype=x.dtype, device=x.device).bernoulli_(0.8)
        return x + torch.tanh(x) * noise.div_(0.8)
    x = rand((4000, 9), dtype=dtype, device=device)
    rec = Recorder()
    y = _compile(fn, rec)(x)
    dropped = (y == x).all(1)
    assert 0.17 < dropped.float().mean().item() < 0.23
    assert_close(y[~dropped], (x + torch.tanh(x) / 0.8)[~dropped])
    assert _externs(rec) == ["seeds"] and "bernoulli" not in _aten_ops(rec)


def test_a_graph_left_to_eager_draws_with_atens_ops(device):
    """The rewrite copies the graph: a signature past `max_sizes` runs the captured graph op by op,
    with eager's dropout (its draws then are eager's, on the CPU bit for bit)."""
    torch._dynamo.reset()
    def fn(x):
        return F.dropout(x + 1, 0.5, training=True)
    f = torch.compile(fn, backend="autofuse", dynamic=True, options={"strict": True, "use_db": False, "max_sizes": 1})
    f(rand((6, 5), device=device))
    x = rand((7, 5), device=device)
    with pytest.warns(UserWarning, match="max_sizes"):
        torch.manual_seed(2)
        got = f(x)
    if device == "cpu":
        torch.manual_seed(2)
        assert torch.equal(got, fn(x))


@pytest.mark.gpu
def test_a_cuda_graph_draws_what_the_uncaptured_program_draws(device):
    """Replayed as a CUDA graph, a program draws anew at each call and, under one seed, what it draws
    uncaptured: the capture's warm-up runs leave the generator as they found it."""
    def fn(x):
        return torch.relu(x) + 0.5 * torch.rand_like(x) + 0.1 * torch.randn_like(x)

    x = rand((100, 77), device=device)
    runs = []
    with torch.no_grad():
        for graphs in (True, False):
            compiled = _compile(fn, cudagraphs=graphs)
            torch.manual_seed(3)
            runs.append([compiled(x).clone() for _ in range(3)])
    graphed, plain = runs
    for a, b in zip(graphed, plain):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(graphed[0], graphed[1]) and not torch.equal(graphed[1], graphed[2])
