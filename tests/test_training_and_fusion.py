"""Training through the compiler (forward and backward graphs) and kernel counts of fusion."""
import pytest
import torch
import torch.nn.functional as F

import autofuse
from autofuse.api import Recorder
from tests.helpers import compile_and_compare, kernels_of, rand, seed_fn


def _grads_match(fn, inputs, device, rtol=1e-4, atol=1e-5):
    torch._dynamo.reset()
    rec = Recorder()
    compiled = autofuse.compile(fn, strict=True, poison=True, recorder=rec)
    eager_in = [x.detach().clone().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    comp_in = [x.detach().clone().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    out_e, out_c = fn(*eager_in), compiled(*comp_in)
    torch.testing.assert_close(out_c, out_e, rtol=rtol, atol=atol)
    g = torch.randn_like(out_e)
    out_e.backward(g)
    out_c.backward(g)
    for a, b in zip(comp_in, eager_in):
        if b.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, rtol=rtol, atol=atol)
    labels = [label for label, _, _ in rec.graphs]
    assert "forward" in labels and "backward" in labels
    return rec




def test_training_seed_example(device):
    _grads_match(seed_fn, [rand((33, 47)), rand((47,)), rand((47,)), rand((47,))], device)


def test_training_layernorm(device):
    w, b = rand((45,)), rand((45,))
    _grads_match(lambda x, w, b: F.layer_norm(x, (45,), w, b), [rand((19, 45)), w, b], device)


def test_training_softmax(device):
    _grads_match(lambda x: torch.softmax(x, -1) * 3.0, [rand((21, 37))], device)


def test_training_cross_entropy(device):
    target = torch.randint(0, 29, (23,))
    target[3] = -100  # ignored

    def fn(logits, target):
        return F.cross_entropy(logits, target, ignore_index=-100)
    _grads_match(fn, [rand((23, 29)), target], device)


def test_training_module_parameters(device):
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.LayerNorm(31), torch.nn.GELU(), torch.nn.Linear(31, 13)).to(device)
    m2 = torch.nn.Sequential(torch.nn.LayerNorm(31), torch.nn.GELU(), torch.nn.Linear(31, 13)).to(device)
    m2.load_state_dict(m.state_dict())
    compiled = autofuse.compile(m2, strict=True, poison=True)
    x = rand((9, 31), device=device)
    m(x).square().sum().backward()
    compiled(x).square().sum().backward()
    for p1, p2 in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p2.grad, p1.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,padding_idx", [(torch.float32, None), (torch.float32, 3), (torch.bfloat16, 3)])
def test_embedding_gradient_with_repeated_tokens(device, dtype, padding_idx):
    """An embedding's weight gradient sums the rows of repeated tokens and leaves the padding row
    at zero, as eager's; in bf16 no farther from float64's than eager's."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(50, 24, padding_idx=padding_idx), torch.nn.LayerNorm(24))
    m = m.to(device, dtype)
    m2 = torch.nn.Sequential(torch.nn.Embedding(50, 24, padding_idx=padding_idx), torch.nn.LayerNorm(24))
    m2 = m2.to(device, dtype)
    m2.load_state_dict(m.state_dict())
    ids = torch.randint(0, 50, (4, 37), device=device)
    ids[0, :5] = 7
    ids[1, 0] = 3
    w = torch.randn(4, 37, 24, device=device)
    rec = Recorder()
    compiled = autofuse.compile(m2, strict=True, poison=True, recorder=rec)
    (m(ids).float() * w).sum().backward()
    (compiled(ids).float() * w).sum().backward()
    if dtype == torch.float32:
        for p1, p2 in zip(m.parameters(), m2.parameters()):
            torch.testing.assert_close(p2.grad, p1.grad, rtol=1e-4, atol=1e-5)
    else:   # bf16: eager's layer norm gradients are themselves far from float64's; no farther than eager
        m64 = torch.nn.Sequential(torch.nn.Embedding(50, 24, padding_idx=padding_idx), torch.nn.LayerNorm(24))
        m64 = m64.to(device, torch.float64)
        m64.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
        (m64(ids) * w).sum().backward()
        for p1, p2, p64 in zip(m.parameters(), m2.parameters(), m64.parameters()):
            err_e, err_c = ((g.grad.double() - p64.grad).abs().max() for g in (p1, p2))
            assert err_c <= max(1.5 * err_e, 1e-2 * p64.grad.abs().max()), (err_c, err_e)
    assert [label for label, _, _ in rec.graphs] == ["forward", "backward"]


# ---- kernel counts ---------------------------------------------------------------------------

def test_the_forward_saves_inputs_not_what_the_backward_can_recompute(device):
    """Training graphs are split as Inductor splits them (the min-cut partition): SwiGLU's forward
    saves its two inputs, and the backward recomputes silu(a) in its own kernel, where the default
    partition saved silu(a) too (a third tensor of the activation's size written by the forward
    and read back)."""
    rec = _grads_match(lambda a, b: F.silu(a) * b, [rand((37, 53)), rand((37, 53))], device)
    (forward,) = [gm for label, gm, _ in rec.graphs if label == "forward"]
    (output,) = forward.graph.find_nodes(op="output")
    saved = [n for n in output.args[0][1:] if isinstance(n, torch.fx.Node)]
    assert saved and all(n.op == "placeholder" for n in saved), [n.format_node() for n in saved]


@pytest.mark.parametrize("reduce", ["amax", "amin", "max"])
def test_the_backward_of_a_maximum_compares_the_values_reduced(device, reduce):
    """An amax's backward counts the input elements equal to the saved maximum: the forward saves
    what it compares (the mask) instead of the backward recomputing the input, which another kernel
    may round otherwise (no element equal, a count of 0, NaN gradients on the GPU)."""
    red = {"amax": lambda v: v.amax(0, keepdim=True), "amin": lambda v: v.amin(0, keepdim=True),
           "max": lambda v: v.max()}[reduce]

    def fn(a, b):
        v = (a / (b.abs() + 1) - a.mean(-1, keepdim=True)).abs()
        return v / (red(v) + 1)
    rec = _grads_match(fn, [rand((25, 25)), rand((25, 1), noncontig=True)], device)
    (backward,) = [gm for label, gm, _ in rec.graphs if label == "backward"]
    for n in backward.graph.find_nodes(op="call_function", target=torch.ops.aten.eq.Tensor):
        computed = [a for a in n.args if isinstance(a, torch.fx.Node) and a.target is not torch.ops.aten.alias.default
                    and a.op != "placeholder"]
        assert not computed, f"the backward recomputes what it compares: {n.format_node()}"


def test_seed_example_is_one_kernel():
    c = compile_and_compare(seed_fn, [rand((64, 48)), rand((48,)), rand((48,)), rand((48,))])
    ks = kernels_of(c)
    assert [k.name for k in ks] == ["triton_per_fused_add_mean_mul_relu_sub_0"]
    assert set(ks[0].reads) == {"arg0", "arg1", "arg2", "arg3"} and len(ks[0].writes) == 1


def test_pointwise_chain_is_one_kernel():
    def fn(x, y):
        a = torch.sin(x) + y
        b = torch.exp(a) * 0.5
        return torch.where(b > 1, b, -a), a.sigmoid()
    ks = kernels_of(compile_and_compare(fn, [rand((17, 23)), rand((23,))]))
    assert len(ks) == 1 and ks[0].kind == "pointwise"


def test_reduction_with_broadcast_epilogue_is_one_kernel():
    def fn(x):
        return x - x.amax(-1, keepdim=True) * 0.5
    ks = kernels_of(compile_and_compare(fn, [rand((29, 41))]))
    assert len(ks) == 1 and ks[0].kind == "reduction"


def test_softmax_is_one_kernel():
    ks = kernels_of(compile_and_compare(lambda x: torch.softmax(x, -1), [rand((29, 41))]))
    assert len(ks) == 1


def test_mm_in_the_middle_splits_kernels():
    def fn(x, w, b):
        h = torch.relu(x * 2 + 1)
        y = h @ w
        return torch.tanh(y + b)
    ks = kernels_of(compile_and_compare(fn, [rand((13, 21)), rand((21, 11)), rand((11,))], rtol=1e-4, atol=1e-4))
    kinds = [k.kind for k in ks]
    assert kinds == ["pointwise", "fallback", "pointwise"], kinds
    assert "mm" in ks[1].aten_ops


def test_intermediate_used_only_inside_kernel_is_not_stored():
    def fn(x):
        s = torch.exp(x) + 1
        return s / s.sum(-1, keepdim=True)
    ks = kernels_of(compile_and_compare(fn, [rand((8, 40))]))
    assert len(ks) == 1 and len(ks[0].writes) == 1


def test_large_rows_use_looped_reduction():
    from autofuse import CompileOptions, Heuristics
    from autofuse.capture.trace import compile_traced
    heur = Heuristics(interpreter_block_elems=256)
    # rows of 5000 elements exceed the interpreter's persistent limit (4096): a looped kernel
    fn = lambda x: x - torch.logsumexp(x, -1, keepdim=True)  # noqa: E731
    x = rand((3, 5000))
    c = compile_traced(fn, [x], CompileOptions(strict=True, poison=True, heuristics=heur))
    out = c(x)[0]
    torch.testing.assert_close(out, fn(x), rtol=1e-4, atol=1e-4)
    names = [k.name for k in kernels_of(c)]
    assert any(n.startswith("triton_red_") for n in names), names


def test_backward_graph_is_found_by_its_inputs_strides():
    """A backward graph of static sizes finds its program by the inputs' strides alone: the same
    strides reuse it, other strides (a transposed tangent) compile another and stay correct."""
    from autofuse.capture.backend import CompiledGraph
    from autofuse.capture.trace import trace_aten
    from autofuse.options import CompileOptions

    def fn(g, y):
        return (g * torch.tanh(y)).sum(0), g * 2

    g, y = rand((7, 5)), rand((7, 5))
    gm = trace_aten(fn, [g, y])
    cg = CompiledGraph(gm, CompileOptions(strict=True, use_db=False), "backward")
    assert cg.by_strides is not None and not cg.static
    for args in ([g, y], [g.clone(), y.clone()], [g.t().contiguous().t(), y]):
        out = cg(list(args))
        for a, e in zip(out, fn(*args)):
            torch.testing.assert_close(a, e)
    assert len(cg.programs) == 2 and len(cg.by_strides) == 2
    assert cg.by_strides[((5, 1), (5, 1))] is cg.programs[next(iter(cg.programs))]
