"""Random chains after a matrix product, compiled and compared with eager twice: the kernels that
write their outputs over operands dying in them (`autofuse/schedule/in_place.py`) must leave every
value eager's, whichever way the chain reads the operand: at the element it writes, at another one
(a flip, a roll), or under a mask (a pad, a concatenation), through views of the product, with a
bias, a second product, a returned intermediate. Reduction kernels too (softmax, log-softmax,
norms over the last or the first dim after a prologue), persistent and in looped passes of a few
elements, with an online softmax and a split reduction where they are legal."""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions, Heuristics
from autofuse.capture.trace import trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.compiler import compile_graph
from tests.helpers import assert_close, rand, writes_over_operand

SEEDS = range(24)
REDUCTION_SEEDS = range(36)


class SmallBlocks(Heuristics):
    """Pointwise kernels in blocks of 8: the interpreter runs a kernel's programs one after another,
    so a program that stores over an element another program reads later shows up."""

    def launch_config(self, kind, numel, rnumel, interpret, *args, **kw):
        return LaunchConfig(XBLOCK=8) if kind == "pointwise" else super().launch_config(
            kind, numel, rnumel, interpret, *args, **kw)


class SmallLoops(SmallBlocks):
    """Reductions in looped passes of 4 elements, 2 rows per program, the softmax's sum online
    where legal: a load in a later pass, or recomputed after the store, would read the new value."""

    def launch_config(self, kind, numel, rnumel, interpret, outer=False, legal=None, *args, **kw):
        if kind == "reduction":
            return LaunchConfig(XBLOCK=2, RBLOCK=4, persistent=False, online=(legal or {}).get("online", False))
        return super().launch_config(kind, numel, rnumel, interpret, outer, legal, *args, **kw)


class SplitLoops(SmallBlocks):
    """Reductions split in two chunks of looped passes where legal, else as SmallLoops."""

    def launch_config(self, kind, numel, rnumel, interpret, outer=False, legal=None, *args, **kw):
        if kind == "reduction":
            legal = legal or {}
            return LaunchConfig(XBLOCK=2, RBLOCK=4, persistent=False, online=legal.get("online", False),
                                split=2 if legal.get("split") else 1)
        return super().launch_config(kind, numel, rnumel, interpret, outer, legal, *args, **kw)


def _unary(r: random.Random, t: torch.Tensor) -> torch.Tensor:
    c = r.randrange(9)
    if c == 0:
        return torch.tanh(t)
    if c == 1:
        return F.gelu(t)
    if c == 2:
        return t * 2 + 1
    if c == 3:
        return torch.where(t > 0, t, t * 0.1)
    if c == 4:
        return F.pad(t[..., 1:], (0, 1))                  # a masked load of the operand
    if c == 5:
        return torch.cat([t[..., :3], t[..., 3:] * 2], -1)  # masked loads
    if c == 6:
        return t.flip(-1) + t                             # another element
    if c == 7:
        return t.roll(1, 0) * t
    return torch.sigmoid(t) * t


def _case(seed: int):
    r = random.Random(seed)
    a, k, n = r.choice([6, 9, 12]), r.choice([5, 8]), r.choice([12, 20])
    state = r.getstate()

    def fn(x, w, w2, b):
        r.setstate(state)          # the same choices at every trace and call
        y = x @ w
        if r.random() < 0.4:
            y = y.view(a, n // 4, 4)
        outs = [_unary(r, y).reshape(a, n)] if r.random() < 0.5 else []   # a second reader in the kernel
        for _ in range(r.randint(1, 3)):
            y = _unary(r, y)
            if r.random() < 0.3:
                y = y + b.view(-1)[: y.shape[-1]]
        y = y.reshape(a, n)
        if r.random() < 0.3:
            outs.append(y.sum(0))
        z = y @ w2
        if r.random() < 0.5:
            z = _unary(r, z) + x[:, : z.shape[1]] if z.shape[1] <= x.shape[1] else _unary(r, z)
        if r.random() < 0.2:
            outs.append(y)
        return outs + [z]

    return fn, [rand((a, k)), rand((k, n)) / 3, rand((n, 7)) / 4, rand((n,))]


@pytest.mark.parametrize("seed", SEEDS)
def test_chains_after_a_product_match_eager(seed):
    fn, args = _case(seed)
    gm = trace_aten(fn, args)
    opts = CompileOptions(strict=True, use_db=False, heuristics=SmallBlocks() if seed % 2 else Heuristics())
    prog = compile_graph(gm, args, opts).program
    expected = list(gm(*args))
    for _ in range(2):
        assert_close(prog(list(args)), expected)


def test_most_chains_write_over_an_operand():
    """The cases above exercise the rule: at least half of them store an output over an operand."""
    over = 0
    for seed in SEEDS:
        fn, args = _case(seed)
        over += writes_over_operand(compile_graph(trace_aten(fn, args), args,
                                           CompileOptions(strict=True, use_db=False)).program)
    assert over >= len(SEEDS) // 2, over


def _reduce(r: random.Random, t: torch.Tensor) -> torch.Tensor:
    c = r.randrange(8)
    if c == 0:
        return torch.softmax(t, -1)
    if c == 1:
        return torch.log_softmax(t, -1)
    if c == 2:
        return F.layer_norm(t, t.shape[-1:])
    if c == 3:
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)   # RMS norm
    if c == 4:
        return torch.softmax(t, 0)                                        # over the first dim
    if c == 5:
        return t - t.amax(-1, keepdim=True) + t.sum(-1, keepdim=True) * 0.1
    if c == 6:
        return torch.softmax(t.flip(-1), -1) * t                          # another element
    return torch.cumsum(t, -1)


def _reduction_case(seed: int):
    r = random.Random(seed)
    a, k, n = r.choice([6, 9, 12]), r.choice([5, 8]), r.choice([12, 20])
    state = r.getstate()

    def fn(x, w, w2, b):
        r.setstate(state)
        y = x @ w
        if r.random() < 0.3:
            y = y.view(a, n // 4, 4)
        outs = []
        if r.random() < 0.4:
            y = _unary(r, y)
            if r.random() < 0.3:
                outs.append(y.reshape(a, n) * 1)
        if r.random() < 0.3:   # a returned value of the second pass, and the third pass reads y again
            u = y - y.amax(-1, keepdim=True)
            outs.append(u.reshape(a, n))
            y = y / u.exp().sum(-1, keepdim=True)
        else:
            y = _reduce(r, y)
        if r.random() < 0.4:
            y = _unary(r, y) if r.random() < 0.5 else _reduce(r, y)
        y = y.reshape(a, n)
        if r.random() < 0.2:
            outs.append(y)
        return outs + [y @ w2]

    return fn, [rand((a, k)), rand((k, n)) / 3, rand((n, 7)) / 4, rand((n,))]


HEURISTICS = {0: Heuristics, 1: SmallLoops, 2: SplitLoops}


@pytest.mark.parametrize("seed", REDUCTION_SEEDS)
def test_reduction_chains_after_a_product_match_eager(seed):
    fn, args = _reduction_case(seed)
    gm = trace_aten(fn, args)
    opts = CompileOptions(strict=True, use_db=False, heuristics=HEURISTICS[seed % 3]())
    prog = compile_graph(gm, args, opts).program
    expected = list(gm(*args))
    for _ in range(2):
        assert_close(prog(list(args)), expected)


def test_most_reduction_chains_write_over_an_operand():
    """The reduction cases above exercise the rule: at least a third of them store over an operand,
    in looped passes too."""
    over = {h: 0 for h in (Heuristics, SmallLoops)}
    for h in over:
        for seed in REDUCTION_SEEDS:
            fn, args = _reduction_case(seed)
            over[h] += writes_over_operand(compile_graph(trace_aten(fn, args), args,
                                                  CompileOptions(strict=True, use_db=False, heuristics=h())).program)
    assert all(v >= len(REDUCTION_SEEDS) // 3 for v in over.values()), over


def test_a_returned_output_of_another_shape_is_a_view_of_the_operand_it_is_stored_over():
    """A language model's soft-capped logits (tanh(x / c) * c after the head's product): the
    [tokens, vocab] product dies in the kernel that makes the [batch, seq, vocab] output, which is
    stored over it and handed back as a view of that memory, not beside it (twice the peak)."""
    def fn(h, w):
        return torch.tanh(F.linear(h, w) / 30.0) * 30.0

    args = [rand((2, 7, 16)) * 4, rand((33, 16))]
    gm = trace_aten(fn, args)
    prog = compile_graph(gm, args, CompileOptions(strict=True, use_db=False)).program
    assert writes_over_operand(prog)
    for _ in range(2):
        out = prog(list(args))
        assert_close(out[0], gm(*args))
        assert out[0].shape == (2, 7, 33) and out[0].stride() == (231, 33, 1)
