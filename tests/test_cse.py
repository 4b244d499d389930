"""Repeated pure ops of an inference graph computed once; identity slices dropped; random draws,
in-place updates and graph outputs left as they are. The graph-level tests trace on the CPU (the
pass reads targets and arguments only); the split step runs on every device."""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from autofuse.capture.cse import eliminate_common_subexpressions

from .helpers import assert_close, rand
from .test_regions import split_two_layer_step

aten = torch.ops.aten


def _count(gm: torch.fx.GraphModule, target) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is target)


def test_repeated_pure_ops_are_computed_once():
    """Two identical masks and their scalar constants become one; a full-range slice becomes its
    input; the result is unchanged."""
    def fn(x, y):
        a = torch.where(x > 0, torch.zeros((), dtype=x.dtype), torch.full((), float("-inf")))
        b = torch.where(x > 0, torch.zeros((), dtype=x.dtype), torch.full((), float("-inf")))
        return (y + a).sum(-1) + aten.slice.Tensor(y * 2 + b, 1, 0, sys.maxsize).amax(-1)
    x, y = rand((5, 7), device="cpu"), rand((5, 7), device="cpu")
    gm = make_fx(fn)(x, y)
    wheres = _count(gm, aten.where.self)
    assert wheres == 2 and _count(gm, aten.slice.Tensor) >= 1
    assert eliminate_common_subexpressions(gm) >= 3
    assert _count(gm, aten.where.self) == 1
    assert _count(gm, aten.gt.Scalar) == 1
    assert _count(gm, aten.slice.Tensor) == 0
    assert_close(gm(x, y), fn(x, y))


def test_zero_and_false_are_not_one_constant():
    """full(0), full(0.0) and full(False) have equal arguments in Python (0 == 0.0 == False) but make
    tensors of three dtypes: all three stay."""
    def fn(x):
        return x + torch.full((4,), 0.0) + torch.full((4,), 0).float() + torch.full((4,), False).float()
    gm = make_fx(fn)(rand((4,), device="cpu"))
    assert _count(gm, aten.full.default) == 3
    eliminate_common_subexpressions(gm)
    assert _count(gm, aten.full.default) == 3
    x = rand((4,), device="cpu")
    assert_close(gm(x), fn(x))


def test_random_draws_updates_and_outputs_stay():
    """Two dropout masks stay two draws, an in-place update stays, and two equal outputs stay two
    tensors (the caller may update one)."""
    def fn(x, buf):
        a = torch.rand_like(x)
        b = torch.rand_like(x)
        buf.add_(1)
        return x + 1, x + 1, a - b
    x = rand((6, 5), device="cpu")
    gm = make_fx(fn)(x, torch.zeros(6, 5))
    before = _count(gm, aten.rand_like.default) if _count(gm, aten.rand_like.default) else _count(gm, aten.rand.default)
    eliminate_common_subexpressions(gm)
    after = _count(gm, aten.rand_like.default) if _count(gm, aten.rand_like.default) else _count(gm, aten.rand.default)
    assert before == after == 2
    assert _count(gm, aten.add_.Tensor) == 1
    o1, o2, d = gm(x, torch.zeros(6, 5))
    assert o1 is not o2 and d.abs().sum() > 0


def masked_layers(x, w1, w2, c1, c2):
    """Two attention layers over caches of one symbolic length, each turning the same boolean mask
    into an additive one (as torch's attention does per layer)."""
    keep = torch.arange(c1.shape[1] + 1, device=x.device) % 3 != 1
    out = x
    for w, c in ((w1, c1), (w2, c2)):
        h = F.layer_norm(out, out.shape[-1:])
        k = torch.cat([c, torch.tanh(h @ w)], dim=1)
        bias = torch.where(keep, 0.0, float("-inf"))[None, None, :]
        out = out + torch.softmax(h @ k.transpose(1, 2) + bias, dim=-1) @ k
        h = F.layer_norm(out, out.shape[-1:])
        out = out + F.gelu(h @ w.T) @ w * 0.5
    return out


def test_a_split_step_builds_its_mask_once(device, monkeypatch):
    """In a decoding step split into regions, the per-layer copies of one mask are one ATen op, and
    the outputs equal eager's at every cache length."""
    gm = split_two_layer_step(masked_layers, (6, 9, 13), device, monkeypatch).regions.gm
    assert _count(gm, aten.where.self) + _count(gm, torch.where) <= 1
    assert _count(gm, aten.slice.Tensor) == 0


def test_data_dependent_values_stay():
    """Two `nonzero` of one tensor each define their own unbacked size, which later sizes name:
    both stay, and so do two `item` reads."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    def fn(x):
        a, b = torch.nonzero(x > 0), torch.nonzero(x > 0)
        return a.sum() + b.float().mean() + (x.sum().item() + x.sum().item())
    with FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True):
        gm = make_fx(fn, tracing_mode="fake")(rand((5, 6), device="cpu"))
    before = _count(gm, aten.nonzero.default)
    eliminate_common_subexpressions(gm)
    assert before == _count(gm, aten.nonzero.default) == 2
