"""The same random draws for the reference and every candidate of a graph that samples (dropout).

Note: random ops (bernoulli, rand, randn) run as ATen calls inside a compiled program and draw from
torch's global generators, so two runs of one graph agree only when they start from the same
generator state. The tuner compares each candidate plan's outputs with eager's: it takes one
snapshot before the reference run and replays it before each candidate's run, then leaves the
generators where the caller had them.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch


@dataclass(frozen=True)
class RngSnapshot:
    """The CPU generator's state and each initialized CUDA device's."""

    cpu: torch.Tensor
    cuda: tuple[torch.Tensor, ...]

    @staticmethod
    def take() -> "RngSnapshot":
        cuda = tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() and torch.cuda.is_initialized() else ()
        return RngSnapshot(torch.get_rng_state(), cuda)

    def _restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda:
            torch.cuda.set_rng_state_all(list(self.cuda))

    @contextmanager
    def replay(self) -> Iterator[None]:
        """Run the block from this snapshot's state; afterwards the generators are as they were."""
        before = RngSnapshot.take()
        self._restore()
        try:
            yield
        finally:
            before._restore()
