"""A compiled program replayed as one CUDA graph: the host cost of a call becomes one replay.

Note: like torch.compile(mode="reduce-overhead"), inputs are copied into static buffers the graph
was captured with, and the outputs are static buffers too: a call's outputs are overwritten by
the next call of the same graph (clone them to keep them). Graphs are captured after two warm-up
runs on a side stream (kernels compile and the allocator settles outside the capture).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..measure.rng import RngSnapshot


class GraphedProgram:
    def __init__(self, program: Callable[[Sequence[Any]], list], args: Sequence[Any]) -> None:
        self.program = program
        self.kernels = getattr(program, "kernels", [])
        self.static_args = [_static_copy(a) for a in args]
        # the warm-ups and the capture draw nothing the user sees: the generators are put back, so
        # the first replay draws what the program would have drawn uncaptured (a seeded call repeats)
        with RngSnapshot.take().replay():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    program(self.static_args)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = program(self.static_args)

    def __call__(self, args: Sequence[Any]) -> list:
        dst, src = [], []
        for s, a in zip(self.static_args, args):
            if isinstance(s, torch.Tensor) and s.data_ptr() != a.data_ptr():
                dst.append(s)
                src.append(a)
        if dst:
            # one launch for every input (as Inductor's CUDA graphs do), not one copy_ per input:
            # the profile of the seed graph showed four copy_ calls costing more than the replay
            torch._foreach_copy_(dst, src)
        self.graph.replay()
        return list(self.static_out)


def _static_copy(a: Any) -> Any:
    if not isinstance(a, torch.Tensor):
        return a
    t = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
    t.copy_(a)
    return t


def can_graph(args: Sequence[Any]) -> bool:
    """Only all-GPU calls of graphs that autograd does not track can be captured."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return bool(tensors) and all(t.is_cuda and not t.requires_grad for t in tensors)
