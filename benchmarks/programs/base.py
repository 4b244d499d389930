"""A corpus program: a named nn.Module with its inputs, a category and per-dtype tolerances.

Note: a program is described once by its sizes at the scale users run (`full`) and at a CPU
scale (`tiny`, a few hundred to a few thousand elements, non-powers of two); `make(device,
shrink)` builds the module (random weights from a fixed seed) and random inputs (never zeros)
from whichever set applies. Inputs are drawn on the device itself, so a 10^9-element program
costs no host-side generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from torch import nn

Sizes = Mapping[str, Any]

# (rtol, atol) per output dtype; a program may widen them (GEMM/conv under TF32, huge sums)
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5),
    torch.bfloat16: (4e-2, 4e-2),
    torch.float16: (1e-2, 1e-2),
    torch.float8_e4m3fn: (0.125, 2.0 ** -9),   # one step of the format
    torch.float8_e5m2: (0.25, 2.0 ** -16),
}


@dataclass(frozen=True)
class In:
    """One input: a shape (names are looked up in the sizes) and how its values are drawn."""

    shape: tuple[Any, ...]
    kind: str = "randn"          # randn | uniform (0, 1) | positive | int (0, high) | bool | sign (+-1)
    dtype: torch.dtype | None = None   # None: the program's dtype (int64 for int, bool for bool)
    high: Any = 0                # int inputs: values in [0, high)
    noncontig: bool = False      # a transposed view of the last two dims
    grad: bool = True            # a train program's float input takes a gradient (False: a target, a table)

    def build(self, sizes: Sizes, dtype: torch.dtype, device: str, gen: torch.Generator) -> torch.Tensor:
        shape = tuple(sizes[s] if isinstance(s, str) else s for s in self.shape)
        if self.noncontig:
            shape = shape[:-2] + (shape[-1], shape[-2])
        if self.kind == "int":
            high = sizes[self.high] if isinstance(self.high, str) else self.high
            t = torch.randint(0, high, shape, generator=gen, device=device, dtype=self.dtype or torch.int64)
        elif self.kind == "bool":
            t = torch.rand(shape, generator=gen, device=device) > 0.5
        else:
            t = torch.randn(shape, generator=gen, device=device) if self.kind in ("randn", "sign") else \
                torch.rand(shape, generator=gen, device=device)
            if self.kind == "positive":
                t = t + 0.05
            elif self.kind == "sign":
                t = torch.where(t >= 0, 1.0, -1.0)
            t = t.to(self.dtype or dtype)
        return t.transpose(-1, -2) if self.noncontig else t


class Fn(nn.Module):
    """An nn.Module around a function of the inputs (programs without weights)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


@dataclass(frozen=True)
class Program:
    """One corpus program. `make(device, shrink)` -> (module, inputs)."""

    name: str
    category: str
    module: Callable[[Sizes], nn.Module]
    inputs: tuple[In, ...]
    full: Sizes
    tiny: Sizes
    dtype: torch.dtype = torch.float32
    tolerances: Mapping[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    seed: int = 0
    train: bool = False          # run as a training step (forward and backward, see train.py)
    batch_stats: bool = False    # a train program's module in train() mode (batch norm's statistics)

    def sizes(self, shrink: bool) -> Sizes:
        return self.tiny if shrink else self.full

    def make(self, device: str, shrink: bool = False, seed: int | None = None) -> tuple[nn.Module, tuple]:
        """The module (weights on device, in the program's dtype) and one set of random inputs; a
        train program's float inputs are leaves that require grad (unless their `In` says not)."""
        sizes = self.sizes(shrink)
        seed = self.seed if seed is None else seed
        torch.manual_seed(seed)
        module = self.module(sizes).to(device)
        if any(p.is_floating_point() for p in module.parameters()):
            module = module.to(self.dtype)
        gen = torch.Generator(device=device).manual_seed(seed)
        args = tuple(i.build(sizes, self.dtype, device, gen) for i in self.inputs)
        if self.train:
            args = tuple(a.requires_grad_() if i.grad and a.is_floating_point() else a
                         for i, a in zip(self.inputs, args))
        return module.train(self.train and self.batch_stats), args

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        """(rtol, atol) for an output of this dtype (exact for integer outputs)."""
        if not dtype.is_floating_point:
            return (0.0, 0.0)
        return self.tolerances.get(dtype, TOLERANCES.get(dtype, (1e-4, 1e-5)))


def fn_program(name: str, category: str, fn: Callable[..., Any], inputs: tuple[In, ...], full: Sizes, tiny: Sizes,
               dtype: torch.dtype = torch.float32, **kw: Any) -> Program:
    """A program without weights: fn applied to the inputs."""
    return Program(name, category, lambda s: Fn(fn), inputs, full, tiny, dtype, **kw)


def short(dtype: torch.dtype) -> str:
    return {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}[dtype]
