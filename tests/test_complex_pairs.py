"""Complex arithmetic read back as real numbers runs on real pairs (capture/complex_pairs.py):
rotary embeddings written with complex numbers fuse into one kernel per output, forward and
backward, equal to eager; what the rewrite does not know keeps its ATen ops and stays correct."""
from __future__ import annotations

import warnings

import pytest
import torch

import autofuse
from tests.helpers import assert_close, rand


def rope_freqs(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    return torch.polar(torch.ones(end, dim // 2), torch.outer(torch.arange(end).float(), freqs))


def rotary(xq: torch.Tensor, xk: torch.Tensor, freqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta's LLaMA reference rotary embedding: pairs of features as complex numbers times the
    frequencies' unit complex numbers."""
    q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs.view(1, q.shape[1], 1, q.shape[-1])
    return torch.view_as_real(q * f).flatten(3).type_as(xq), torch.view_as_real(k * f).flatten(3).type_as(xk)


def compiled(fn, *args):
    """fn compiled strictly on poisoned buffers, run, compared with eager; its kernels."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = autofuse.compile(fn, strict=True, use_db=False, poison=True)(*args)
        report = autofuse.explain(fn, args, strict=True, use_db=False)
    assert_close(out, fn(*args))
    return report.kernels


def aten_calls(kernels) -> list:
    return [k.aten_ops for k in kernels if k.kind == "fallback"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_complex_rotary_embedding_is_generated(device, dtype):
    """Query and key rotated: one kernel each, the frequencies (a complex input) read through one
    view of them as real numbers, no complex op left to ATen."""
    xq, xk = rand((2, 8, 4, 16), dtype, device), rand((2, 8, 2, 16), dtype, device)
    freqs = rope_freqs(16, 8).to(device)
    kernels = compiled(lambda q, k, f: rotary(q * 2, k + 1, f), xq, xk, freqs)
    assert aten_calls(kernels) == [("view_as_real",)]
    assert sum(k.kind == "pointwise" for k in kernels) == 2


def test_complex_rotary_embedding_trains(device):
    """Forward and backward (the backward multiplies by the saved frequencies' conjugate)."""
    freqs = rope_freqs(16, 8).to(device)

    def step(q, k):
        a, b = rotary(q * 2, k + 1, freqs)
        return (a * a).sum() + (b * b).sum()
    q0, k0 = rand((2, 8, 4, 16), device=device), rand((2, 8, 2, 16), device=device)
    grads = []
    for fn in (step, autofuse.compile(step, strict=True, use_db=False, poison=True)):
        q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
        loss = fn(q, k)
        loss.backward()
        grads.append((loss, q.grad, k.grad))
    for got, want in zip(grads[1], grads[0]):
        assert_close(got, want)


CASES = {
    "polar-inside": lambda a, b: torch.view_as_real(torch.view_as_complex(a) * torch.polar(b.abs(), b)),
    "conj-and-sum": lambda a, b: torch.view_as_real(
        torch.view_as_complex(a) * torch.view_as_complex(a.flip(0)).conj() + torch.view_as_complex(a)) * 2,
    "complex-scalar": lambda a, b: torch.view_as_real(torch.view_as_complex(a) * (1 - 2j)) + 1,
    "real-tensor-and-number": lambda a, b: torch.view_as_real(torch.view_as_complex(a) * b * 0.5
                                                               - torch.view_as_complex(a)),
    "permute-slice-expand": lambda a, b: torch.view_as_real(
        torch.view_as_complex(a).permute(1, 0)[1:4] * torch.view_as_complex(a)[0, :3, None].expand(3, 5)).sum(-1),
    "abs-and-angle": lambda a, b: torch.view_as_complex(a).mul(2j).abs() + torch.view_as_complex(a).angle(),
}


@pytest.mark.parametrize("case", list(CASES))
def test_complex_arithmetic_on_pairs_is_generated(device, case):
    a, b = rand((5, 7, 2), device=device), rand((7,), device=device)
    assert aten_calls(compiled(CASES[case], a, b)) == []


def test_complex_values_the_rewrite_does_not_know_keep_their_aten_ops(device):
    """A complex output and a complex op without a rule (exp) stay ATen calls and stay correct."""
    a = rand((5, 7, 2), device=device)
    kernels = compiled(lambda a: (torch.view_as_complex(a) * torch.view_as_complex(a),
                                  torch.view_as_real(torch.view_as_complex(a).exp() * 2)), a)
    assert ("mul",) in aten_calls(kernels) and ("exp",) in aten_calls(kernels)


def test_float64_pairs_and_edge_values(device):
    """complex128 as f64 pairs; abs of inf, NaN, signed zeros and huge values (hypot's)."""
    a = rand((5, 7, 2), torch.float64, device)
    f = torch.polar(torch.ones(7, dtype=torch.float64), torch.arange(7, dtype=torch.float64)).to(device)
    compiled(lambda a, f: torch.view_as_real(torch.view_as_complex(a) * f), a, f)
    edge = torch.tensor([[float("inf"), float("nan")], [3.0, 4.0], [0.0, -0.0], [1e30, 1e30]], device=device)
    assert aten_calls(compiled(lambda e: torch.view_as_complex(e).abs() * 2, edge)) == []


COMPLEX_OPS = {"view_as_complex", "view_as_real", "polar", "mul", "unsqueeze"}


def test_llama4_rotary_embedding_leaves_no_complex_op_to_aten(device):
    """transformers' Llama 4 rotates queries and keys with complex numbers: compiled strict, equal to
    eager, and no complex op left to ATen (without the rewrite: views as complex and real, polar and
    complex products in every layer)."""
    tf = pytest.importorskip("transformers")
    if not hasattr(tf, "Llama4TextConfig"):
        pytest.skip("this transformers has no Llama 4")
    cfg = tf.Llama4TextConfig(hidden_size=64, intermediate_size=128, intermediate_size_mlp=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=500,
                              num_local_experts=4, max_position_embeddings=64)
    cfg.use_cache = False
    torch.manual_seed(0)
    model = tf.Llama4ForCausalLM(cfg).to(device).eval()
    ids = torch.randint(0, 500, (2, 16), generator=torch.Generator().manual_seed(0)).to(device)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model(input_ids=ids).logits
        got = autofuse.compile(model, strict=True, use_db=False)(input_ids=ids).logits
        report = autofuse.explain(model, (), example_kwargs={"input_ids": ids}, strict=True, use_db=False)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    left = {op for ops in aten_calls(report.kernels) for op in ops}
    assert not left & COMPLEX_OPS, left
