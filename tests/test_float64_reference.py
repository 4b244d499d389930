"""The float64 reference a bf16 plan is judged against computes the graph's own casts in float64 too."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autofuse.measure.float64 import float64_graph_outputs
from autofuse.search.tune import capture
from tests.helpers import rand


def _graph(fn, *args):
    (_, gm, gargs), = capture(fn, args)
    return gm, gargs


def _rounding_cast(x):
    y = (x.float() * 1000.0 + 1.0).to(torch.bfloat16)   # a cast the model writes: rounds in eager
    return y.float() - x.float() * 1000.0


def test_the_graphs_own_casts_are_promoted():
    x = (rand((67, 33)) + 0.5).to(torch.bfloat16)
    gm, args = _graph(_rounding_cast, x)
    assert any(n.target is torch.ops.aten._to_copy.default and n.kwargs.get("dtype") == torch.bfloat16
               for n in gm.graph.nodes)
    inputs_cast = gm(*[a.double() for a in args])[0]
    assert (inputs_cast - 1).abs().max() >= 1             # casting the inputs keeps the bf16 rounding
    ref, = float64_graph_outputs(gm, args)
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref, torch.ones_like(ref), rtol=0, atol=1e-9)
    assert args[0].dtype == torch.bfloat16                # the caller's inputs are untouched


def _attention(q, k, v):
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1) * 2.0


def test_fused_attention_runs_as_its_math_in_the_kernels_layout():
    q, k, v = (rand((2, 3, 17, 8)).to(torch.bfloat16) for _ in range(3))
    gm, args = _graph(_attention, q, k, v)
    ref, = float64_graph_outputs(gm, args)
    exact = _attention(q.double(), k.double(), v.double())
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref, exact, rtol=1e-12, atol=1e-12)


def test_random_draws_keep_their_dtype():
    """A random op draws the numbers eager draws (same seed), whatever the reference's dtype."""
    def noisy(x):
        return x * torch.rand_like(x)
    x = rand((5, 7)).to(torch.bfloat16)
    gm, args = _graph(noisy, x)
    torch.manual_seed(3)
    eager = gm(*args)[0]
    torch.manual_seed(3)
    ref, = float64_graph_outputs(gm, args)
    torch.testing.assert_close(ref.to(torch.bfloat16), eager, rtol=1e-2, atol=1e-2)
