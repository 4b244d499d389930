"""Higher-order ops (`torch.cond`, `while_loop`, flex attention, a user Triton kernel's call) inside a
compiled graph: the op runs as one step, its bodies passed to it as they are, between generated
kernels for the rest of the graph; in a training step its backward does the same. Compared with
eager on poisoned buffers. (Flex attention's forward step runs a kernel of ours where it can:
tests/test_flex_attention.py.)"""
import operator
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import autofuse
from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.backend import CompiledGraph
from autofuse.plan.graph_hash import graph_hash
from autofuse.runtime.loader import interpret_env
from tests.helpers import assert_close, compile_and_compare, kernels_of, rand


def branchy(x):
    """Both branches read x through a kernel before the op and feed one after it."""
    return torch.cond(x.sum() > 0, lambda t: t.sin() * t, lambda t: t.cos() + 1, (x * 2,)) * 3


@pytest.mark.parametrize("sign", [1, -1])
def test_cond_runs_as_aten_between_generated_kernels(device, sign):
    x = rand((7, 9), device=device).abs() * sign
    kinds = [k.kind for k in kernels_of(compile_and_compare(branchy, [x]))]
    assert kinds.count("fallback") == 1 and len(kinds) >= 3, kinds


def test_cond_in_a_training_step(device):
    x = rand((6, 10), device=device)
    w = rand((10,), device=device).requires_grad_()
    fn = lambda x, w: branchy(x * w).sum(0)  # noqa: E731
    fn(x, w).pow(2).sum().backward()
    expected, w.grad = w.grad, None
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        autofuse.compile(fn, strict=True, use_db=False, recorder=rec)(x, w).pow(2).sum().backward()
    assert_close(w.grad, expected)
    assert len(rec.graphs) == 2   # forward and backward, both compiled


def test_flex_attention_with_a_score_function_and_a_block_mask(device):
    q, k, v = (rand((2, 3, 40, 16), device=device) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 40, 40, device=device)

    def fn(q, k, v):
        a = flex_attention(q.relu(), k, v, score_mod=lambda s, b, h, qi, ki: s + (qi - ki) * 0.05)
        return flex_attention(a * 2, k, v, block_mask=mask) + 1
    # through Dynamo, as users compile it: on CUDA, eager flex attention compiles itself, which a
    # trace of fn outside Dynamo (compile_and_compare's) cannot follow
    rec = Recorder()
    compiled = autofuse.compile(fn, strict=True, use_db=False, poison=True, recorder=rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # eager flex attention warns that it is not fused
        assert_close(compiled(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-4)
    kinds = [k.kind for _, _, art in rec.graphs for k in art.kernels]
    assert kinds.count("fallback") == 2, kinds


def test_while_loop_runs_as_aten(device):
    """Its fake rule needs a symbolic shape environment: the outputs recorded at capture stand in."""
    from torch._higher_order_ops.while_loop import while_loop

    def fn(x):
        steps = torch.zeros((), dtype=torch.int64, device=x.device)
        return while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2 - 1), (steps, x.sin()))[1] + 1
    x = rand((5, 7), device=device)
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = autofuse.compile(fn, strict=True, use_db=False, recorder=rec)(x)
    assert_close(actual, fn(x))
    kinds = [k.kind for _, _, art in rec.graphs for k in art.kernels]
    assert "fallback" in kinds and len(kinds) >= 3, kinds


def tripling_kernel(device, scale=3.0):
    """A user's Triton kernel (the interpreter's on the CPU), defined as a user module would."""
    import triton
    import triton.language as tl
    with interpret_env(device != "cuda"):
        @triton.jit
        def triple(x_ptr, y_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(y_ptr + i, tl.load(x_ptr + i, m) * SCALE, m)
    return triple


def user_kernel_graph(kernel, n, scale=3.0):
    """The graph Dynamo and AOTAutograd make of `y = empty_like(x + 1); kernel[grid](x + 1, y, ...);
    relu(y)`: the kernel's functional wrapper over a clone of y, its result taken by name."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional
    aten = torch.ops.aten
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.add.Tensor, (x, 1))
    e = g.call_function(aten.empty_like.default, (y,))
    w = g.call_function(triton_kernel_wrapper_functional, (), dict(
        kernel_idx=kernel_side_table.add_kernel(kernel),
        constant_args_idx=kernel_side_table.add_constant_args({"n": n, "SCALE": scale, "BLOCK": 64}),
        grid=[((n + 63) // 64, 1, 1)], tma_descriptor_metadata={}, kwargs={"x_ptr": y, "y_ptr": e},
        tensors_to_clone=["y_ptr"]))
    out = g.call_function(operator.getitem, (w, "y_ptr"))
    g.output((g.call_function(aten.relu.default, (out,)),))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_a_user_triton_kernel_runs_between_generated_kernels(device):
    x = rand((300,), device=device)
    gm = user_kernel_graph(tripling_kernel(device), 300)
    compiled = CompiledGraph(gm, CompileOptions(strict=True, use_db=False, poison=True), "traced")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(compiled([x])[0], ((x + 1) * 3).relu())
    kinds = [k.kind for p in compiled.programs.values() for k in p.kernels]
    assert kinds.count("fallback") == 1 and "pointwise" in kinds, kinds


def test_a_user_kernels_hash_reads_its_source_and_constants_not_its_table_index():
    x = torch.randn(300)
    one = tripling_kernel("cpu")
    first, again = graph_hash(user_kernel_graph(one, 300), [x]), graph_hash(user_kernel_graph(one, 300), [x])
    assert first == again                          # registered twice: two indices, one key
    assert graph_hash(user_kernel_graph(one, 300, scale=2.0), [x]) != first
