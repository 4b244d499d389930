"""Sums, products, any and all over fewer than 8 elements are unrolled into the pointwise kernels
around them, as Inductor unrolls them: equal to eager for every dtype and layout, and no reduction
kernel of their own. Max and min keep theirs: a softmax over a short row stays one kernel."""
from __future__ import annotations

import pytest
import torch

from autofuse.lower.reductions import UNROLL_BELOW
from tests.helpers import compile_and_compare, kernels_of, rand

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def kinds(compiled) -> list[str]:
    return [k.kind for k in kernels_of(compiled)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_mixture_of_experts_combine_is_one_pointwise_kernel(dtype, device):
    """Each token's 2 routed expert outputs gathered, weighted and summed (Mixtral's combine)."""
    def combine(out, order, weights):
        picked = out[order].view(5, 2, 7) * weights.unsqueeze(-1)
        return torch.relu(picked.sum(1))
    out = rand((10, 7), dtype, device)
    order = torch.randperm(10).to(device)
    weights = rand((5, 2), dtype, device, low=0.1, high=1.0)
    assert kinds(compile_and_compare(combine, (out, order, weights))) == ["pointwise"]


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "mean", "any", "all"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_every_kind_equals_eager(op, dtype, device):
    if dtype == torch.bool and op in ("prod", "mean"):
        pytest.skip("eager rejects or promotes it otherwise")
    if op == "mean" and not dtype.is_floating_point:
        pytest.skip("mean takes floats")
    x = rand((9, 3, 5), dtype, device, noncontig=True)   # a transposed middle dim of 3
    compiled = compile_and_compare(lambda x: getattr(torch, op)(x, dim=1), (x,))
    assert ("reduction" in kinds(compiled)) == (op in ("amax", "amin"))


def test_several_dims_and_the_threshold(device):
    """Two reduced dims of 2 x 3 are unrolled together, a NaN included (it propagates through the
    sum and the product); 8 elements are not."""
    x = rand((4, 2, 3, 6), device=device)
    x[1, 0, 2, 3] = float("nan")
    compiled = compile_and_compare(lambda x: (x.sum((1, 2)) * 2, x.prod(1), x.isnan().any(2)), (x,))
    assert "reduction" not in kinds(compiled)
    y = rand((6, UNROLL_BELOW), device=device)
    assert "reduction" in kinds(compile_and_compare(lambda y: y.sum(-1) + 1, (y,)))


@pytest.mark.parametrize("fn", [lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, 1) + 1.0],
                         ids=["softmax", "log_softmax"])
def test_a_softmax_over_a_short_row_stays_one_kernel(fn, device):
    x = rand((5, 6, 6), device=device)
    assert len(kernels_of(compile_and_compare(fn, (x,)))) == 1


def test_a_norm_over_three_coordinates_fuses_with_its_consumer(device):
    """A point cloud's vector lengths, normalized: one pointwise kernel."""
    p = rand((50, 3), device=device)
    assert kinds(compile_and_compare(lambda p: p / p.norm(dim=-1, keepdim=True), (p,))) == ["pointwise"]
