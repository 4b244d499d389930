"""Random numbers generated in the kernel that uses them (`autofuse::philox_rand` / `philox_randn`,
capture/random_ops.py)."""
from __future__ import annotations

import math

import torch

from ..ir.values import Buffer, Layout, Pointwise, ReinterpretView
from .registry import Unsupported, register


@register("autofuse::philox_rand")
def _philox_rand(g, seed, like):
    """Element k (row-major) is `tl.rand(seed, k)`: a function of its position, so any fusion or
    launch config draws the same numbers."""
    return _draw(g, "rand", seed, like)


@register("autofuse::philox_randn")
def _philox_randn(g, seed, like):
    """Element k (row-major) is `tl.randn(seed, k)`."""
    return _draw(g, "randn", seed, like)


def _draw(g, op: str, seed_value, like) -> Pointwise:
    """Draws of `like`'s size (its values are not read)."""
    if not isinstance(seed_value, (Buffer, ReinterpretView)) or tuple(seed_value.size):
        raise Unsupported("the seed is not a 0-d tensor in memory")
    size = tuple(int(s) for s in like.size)
    if math.prod(size) > 2 ** 31 - 1:
        raise Unsupported("2**31 or more elements: the eager op draws them")   # the prelude's _rand counts in int32
    row_major = Layout.contiguous(g.out.device, torch.float32, size)   # element k of the draw is its k-th
    seed_of = seed_value.loader()

    def fn(ops, idx):
        return ops.op(op, seed_of(ops, []), ops.index_expr(row_major.index(idx), torch.int32))

    return Pointwise(g.out.device, torch.float32, size, fn)
