"""A graph that samples gives the same outputs from one RNG snapshot, and the caller's generators
are left as they were (measure/rng.py)."""
import torch

from autofuse.measure.rng import RngSnapshot


def test_replay_draws_the_same_and_restores_the_callers_state():
    snap = RngSnapshot.take()
    with snap.replay():
        a = torch.nn.functional.dropout(torch.ones(1000), 0.5, training=True)
    torch.rand(7)   # the caller moves on
    before = torch.get_rng_state()
    with snap.replay():
        b = torch.nn.functional.dropout(torch.ones(1000), 0.5, training=True)
    assert torch.equal(a, b) and 0 < (a == 0).sum() < 1000
    assert torch.equal(torch.get_rng_state(), before)
