"""The loss programs of the cost model's training data (benchmarks/losses.py) on the CPU: they build,
run and are finite, are seeded and diverse, fill the corpus's byte range at full size, compile to
what eager computes, and `collect --losses N` tunes them after the corpus."""
from __future__ import annotations

import pytest
import torch

from benchmarks import collect
from benchmarks.corpus import MAX_BYTES, MIN_BYTES
from benchmarks.losses import KINDS, _build, loss_program, losses
from tests.helpers import compile_and_compare

TINY = 0.001


def test_losses_build_run_and_are_finite():
    for p in losses(30, seed=0, scale=TINY):
        fn, (logits, target) = p.build("cpu")
        assert logits.shape[1] == p.cols and target.dtype == torch.int64
        out = fn(logits, target)
        assert torch.isfinite(out).all(), p.name
        if p.tags[2] == "none":
            assert out.shape == target.shape
        else:
            assert out.dim() == 0


def test_losses_are_seeded_diverse_and_full_sized():
    a, b = losses(40, seed=0), losses(40, seed=0)
    assert [p.name for p in a] == [p.name for p in b] and len({p.name for p in a}) == 40
    assert [p.name for p in losses(5, seed=0)] == [p.name for p in a[:5]]             # a prefix
    assert [p.name for p in losses(40, seed=0, scale=TINY)] == [p.name for p in a]     # scale: rows only
    assert {p.name for p in losses(40, seed=1)}.isdisjoint({p.name for p in a})
    _, args = loss_program(0, 3, TINY).build("cpu")
    _, args2 = loss_program(0, 3, TINY).build("cpu")
    assert all(torch.equal(x, y) for x, y in zip(args, args2))                         # same values too
    assert {p.tags[1] for p in a} == set(KINDS)
    assert {p.tags[2] for p in a} == {"mean", "sum", "none"}
    assert len({p.cols for p in a}) >= 5
    assert {p.name.split("_")[2] for p in a} == {"f32", "bf16", "f16"}
    for p in a:
        _, (logits, _) = p.build("meta")
        assert MIN_BYTES <= logits.numel() * logits.element_size() <= MAX_BYTES, p.name


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_each_loss_kind_compiles_to_eager(kind, reduction):
    dtype = torch.float32 if kind == "ce" else torch.bfloat16   # "ce" on the logits' own dtype; the others upcast
    fn, args = _build(kind, reduction, dtype, 37, 100, 7, "cpu")
    if kind == "ignore":
        assert (args[1] == -100).any()
    compile_and_compare(fn, args, atol=1e-4, rtol=1e-4)


def test_collect_tunes_the_losses_after_the_corpus(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(collect, "run_program", lambda prog, *a: started.append(prog.name) or
                        {"name": prog.name, "status": "ok", "graphs": 0, "kernels": 0, "failures": 0, "seconds": 0.0})
    assert collect.main(["--out", str(tmp_path / "c"), "--programs", "2", "--losses", "3", "--seed", "4",
                         "--device", "cpu"]) == 0
    assert len(started) == 5 and started[0].startswith("s4_") and started[1].startswith("s4_")
    assert started[2:] == [p.name for p in losses(3, seed=4)]
