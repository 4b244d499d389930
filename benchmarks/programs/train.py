"""The training step of a train program: the forward, then the backward from fixed output gradients.

    Step(f, module, program)(*args) -> (outputs, grads)     wrapper(program, module)(f) -> f or its Step

Note: the step differentiates every floating output against random output gradients (a seeded
draw, the same for every variant and every call, rounded to the program's dtype) with respect to
the inputs that require grad and the module's parameters, through `torch.autograd.grad`, so no
`.grad` accumulates between calls and the backward graph sees gradients a loss would give (never
zeros or ones). Outputs and gradients come back detached, one structure that `check.mismatch`
compares with eager's.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map

from .base import Program

GRAD_SEED = 1234   # the output gradients' seed


def _differentiable(out: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]


def output_grads(outs: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    """Random gradients for outputs, drawn from GRAD_SEED in f32 and rounded to the program's dtype
    first, so a float64 step gets the values its bf16 program gets."""
    gens: dict[torch.device, torch.Generator] = {}
    grads = []
    for o in outs:
        gen = gens.setdefault(o.device, torch.Generator(device=o.device).manual_seed(GRAD_SEED))
        grads.append(torch.randn(o.shape, generator=gen, device=o.device).to(dtype).to(o.dtype))
    return grads


class Step:
    """f (the module, or a compiled form of it) as one training step: (outputs, gradients of the
    inputs that require grad, then of the module's parameters that do). Gradients are enabled
    inside, whatever the caller's mode (the runner calls variants under no_grad). `grad_outputs`
    holds the output gradients of the last call (what the step read besides its inputs)."""

    def __init__(self, f: Callable[..., Any], module: nn.Module, program: Program) -> None:
        self.f, self.dtype = f, program.dtype
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.cache: dict[tuple, list[torch.Tensor]] = {}
        self.grad_outputs: list[torch.Tensor] = []

    def __call__(self, *args: Any) -> tuple[Any, tuple]:
        with torch.enable_grad():
            out = self.f(*args)
            outs = _differentiable(out)
            key = tuple((o.shape, o.dtype, o.device) for o in outs)
            if key not in self.cache:
                self.cache[key] = output_grads(outs, self.dtype)
            self.grad_outputs = self.cache[key]
            wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad] + self.params
            grads = torch.autograd.grad(outs, wrt, self.grad_outputs, allow_unused=True, materialize_grads=True)
        return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out), tuple(grads)


def step_bytes(step: Step, module: nn.Module, args: tuple, result: Any) -> int:
    """Bytes a step reads and writes at the least: the memory its inputs, module state, output
    gradients, outputs and gradients reach, each storage counted once (a gradient that is its output
    gradient passed through, or an expanded view of a smaller tensor, adds nothing)."""
    reach: dict[int, int] = {}
    for t in tree_leaves((args, list(module.parameters()), list(module.buffers()), step.grad_outputs, result)):
        if isinstance(t, torch.Tensor) and t.numel():
            end = t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
            key = t.untyped_storage().data_ptr()
            reach[key] = max(reach.get(key, 0), end * t.element_size())
    return sum(reach.values())


def wrapper(program: Program, module: nn.Module) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """What a runner applies to each variant's callable: the step for a train program, else nothing."""
    if not program.train:
        return lambda f: f
    return lambda f: Step(f, module, program)
