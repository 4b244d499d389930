"""bucketize, and searchsorted over a 1-D sorted sequence (or one that a `sorter` permutation
sorts): one binary search inside a pointwise body.

Note: the search counts the boundaries that lie below a value: those with `not (b >= v)`, or
`not (b > v)` with right=True (torch's comparisons, so a NaN value counts every boundary and lands
past the last, as eager's). With n boundaries it takes bit_length(n) = ceil(log2(n + 1)) steps of
decreasing powers of two s; `last` is the index of the last boundary known to lie below (-1 at
first), and each step reads boundary `last + s` (a gather at a computed index, `ops.indirect`) and
moves `last` there when that boundary lies below too. The answer is last + 1. A step that can
reach past the end clamps its read to the last boundary and does not move there. The index
arithmetic is int32 whenever the boundary count allows, and its value ranges are known (a
constant start, adds of constants, selects), so the gathers need neither a wrap nor a widening.
With a sorter, boundary i is sequence[sorter[i]]: each step gathers the sorter's entry, then the
sequence at it (wrapped if negative, as any gather at a loaded index).
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch

from ..ir.values import Pointwise, is_tensor_value
from .common import LOW_PRECISION, origins_of, promoted_dtype, upcast
from .registry import Unsupported, register

aten = torch.ops.aten

INT32_MAX = 2 ** 31 - 1


def _as_common(ops: Any, v: Any, src: torch.dtype, common: torch.dtype) -> Any:
    """A loaded value (in `upcast(src)`) as eager compares it: cast to the common dtype, which rounds
    an integer to a half type, then computed in `upcast(common)`."""
    if src != common and common in LOW_PRECISION:
        return ops.to_dtype(ops.to_dtype(v, common), torch.float32)
    return v if upcast(src) == upcast(common) else ops.to_dtype(v, upcast(common))


def _search(ops: Any, v: Any, boundary_at: Callable[[Any, sympy.Expr], Any], n: int, right: bool,
            it: torch.dtype) -> Any:
    """The number of boundaries below `v`, as a value of dtype `it` (see the note)."""
    last: Any = None      # None: -1, no step taken yet
    reach = -1            # the largest index `last` can hold after the steps so far
    for s in (1 << j for j in reversed(range(n.bit_length()))):
        past_end = reach + s > n - 1
        if last is None:  # the first read is at a constant index: a broadcast load, no gather
            at = ops.constant(s - 1, it)
            b = boundary_at(ops, sympy.Integer(s - 1))
            stay = ops.constant(-1, it)
        else:
            at = ops.add(last, ops.constant(s, it))
            clamped = ops.minimum(at, ops.constant(n - 1, it)) if past_end else at
            b = boundary_at(ops, ops.indirect(clamped, n))
            stay = last
        stop = ops.gt(b, v) if right else ops.ge(b, v)
        if past_end:
            stop = ops.logical_or(stop, ops.gt(at, ops.constant(n - 1, it)))
        last = ops.where(stop, stay, at)
        reach = min(reach + s, n - 1)
    if last is None:
        return ops.constant(0, it)
    return ops.add(last, ops.constant(1, it))


def _lower(g: Any, boundaries: Any, values: Any, right: bool, sorter: Any = None) -> Pointwise:
    """out[idx] = the bucket of values[idx] among the 1-D sorted `boundaries`, found by one search in
    the kernel. Why not PyTorch's decomposition: it unrolls the same search into tensor ops whose
    midpoints and bounds are int64 tensors (64-bit integer arithmetic, which the GPU emulates with
    pairs of 32-bit instructions) and carries start, end, midpoint and a done mask through every
    step, about 30 operations per step in the corpus program's kernel; this search carries one int32
    index and takes four operations per step: an add, the boundary's gather, a compare, a select."""
    if not is_tensor_value(values) or not is_tensor_value(boundaries) or len(boundaries.size) != 1:
        raise Unsupported("search of a scalar, or in a sequence of more than one dim")
    if sorter is not None and (not is_tensor_value(sorter) or tuple(sorter.size) != tuple(boundaries.size)):
        raise Unsupported("a sorter of another shape than the sequence")
    if isinstance(boundaries, Pointwise):  # a gather per step reads memory, not a recomputed body
        boundaries = g.realize(boundaries)
    if isinstance(sorter, Pointwise):
        sorter = g.realize(sorter)
    n = int(boundaries.size[0])
    common = promoted_dtype(g.fake_arg(0), g.fake_arg(1))
    it = torch.int32 if 2 * n < INT32_MAX else torch.int64
    out = g.out
    vl, bl = values.loader(), boundaries.loader()
    vdt, bdt = values.dtype, boundaries.dtype

    sl = sorter.loader() if sorter is not None else None

    def boundary_at(ops, i):
        at = i if sl is None else ops.indirect(sl(ops, [i]), n)
        return _as_common(ops, bl(ops, [at]), bdt, common)

    def fn(ops, idx):
        found = _search(ops, _as_common(ops, vl(ops, idx), vdt, common), boundary_at, n, right, it)
        return found if it == out.dtype else ops.to_dtype(found, out.dtype)

    size = tuple(int(s) for s in out.shape)
    return Pointwise(out.device, out.dtype, size, fn, origins_of(values, boundaries))


@register(aten.bucketize.Tensor)
def _bucketize(g, values, boundaries, *, out_int32=False, right=False):
    return _lower(g, boundaries, values, right)


@register(aten.searchsorted.Tensor)
def _searchsorted(g, sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    return _lower(g, sorted_sequence, values, right if side is None else side == "right", sorter)
