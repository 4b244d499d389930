"""Output strides of element-wise ops as eager's TensorIterator computes them.

Note: FakeTensor (and the meta kernel) of a few element-wise ops runs a Python reference
implementation that returns a contiguous result (floor division of a transposed tensor), while
eager's TensorIterator lays the output out in the memory order of its inputs. For those ops
(`REFERENCE_LAYOUT_OPS`, found by comparing fake and eager strides of every op tagged
`pointwise` on transposed and broadcast inputs) the output layout is recomputed the way
TensorIterator does it: dims sorted innermost-first by the inputs' strides (the first input with
two non-broadcast strides that differ decides; equal strides put the smaller dim inside), then
dense strides in that order. Other ops keep FakeTensor's answer: some pointwise-tagged ops do
not follow TensorIterator's rule in eager (masked_fill keeps its first input's layout).

The same happens to most binary element-wise ops in float16 and bfloat16 when an input is
expanded (stride 0 over a dim of size > 1): the reference computes in float32 on converted
inputs, and the conversion of an expanded input is a contiguous copy, so the result follows that
copy's order instead of the other input's (a bf16 sum of an expanded bias and a transposed
tensor: eager transposed, FakeTensor row-major). Those ops (`REDUCED_PRECISION_LAYOUT_OPS`, found
the same way, with an expanded input in half precision) are re-laid out in that case only.

On the CPU, TensorIterator itself converts an input whose dtype is not the op's common dtype before
it orders the dims (CUDA's kernels convert as they load): an expanded float16 input of a float32
maximum becomes a contiguous copy there, and eager's CPU result follows that copy's order. The
inputs are taken as those copies on the CPU.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten

from ..ir.index import is_dense


# ops whose FakeTensor strides differ from eager's on non-contiguous inputs (overload names)
REFERENCE_LAYOUT_OPS = frozenset({
    "aten::div.Tensor_mode", "aten::copysign.Tensor", "aten::xlogy.Tensor", "aten::special_xlog1py",
    "aten::logit_backward", "aten::native_dropout_backward", "aten::logical_and", "aten::logical_or",
    "aten::logical_xor", "aten::logaddexp", "aten::logaddexp2", "aten::heaviside",
})
# ... and those whose FakeTensor strides differ from eager's when an input is expanded in float16 or
# bfloat16 (TensorIterator's layout matched eager's on all of them)
REDUCED_PRECISION_LAYOUT_OPS = frozenset({
    "aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor", "aten::true_divide.Tensor",
    "aten::atan2", "aten::hypot", "aten::fmod.Tensor", "aten::remainder.Tensor", "aten::pow.Tensor_Tensor",
    "aten::maximum", "aten::minimum", "aten::max.other", "aten::min.other", "aten::fmax", "aten::fmin",
    "aten::clamp.Tensor", "aten::clamp_max.Tensor", "aten::clamp_min.Tensor", "aten::clip.Tensor",
    "aten::eq.Tensor", "aten::ne.Tensor", "aten::lt.Tensor", "aten::le.Tensor", "aten::gt.Tensor",
    "aten::ge.Tensor", "aten::igamma", "aten::igammac", "aten::gelu_backward", "aten::sigmoid_backward",
    "aten::silu_backward", "aten::tanh_backward",
})
_HALVES = (torch.float16, torch.bfloat16)


def _broadcast_strides(t: torch.Tensor, shape: Sequence[int]) -> list[int]:
    """t's strides against the broadcast shape: 0 where t is broadcast (TensorIterator's operand strides)."""
    lead = len(shape) - t.dim()
    out = [0] * lead
    for d in range(t.dim()):
        out.append(0 if t.shape[d] == 1 and shape[lead + d] != 1 else int(t.stride(d)))
    return out


def _should_swap(dim0: int, dim1: int, strides: list[list[int]], shape: Sequence[int]) -> int:
    for st in strides:
        s0, s1 = st[dim0], st[dim1]
        if s0 == 0 or s1 == 0:
            continue
        if s0 < s1:
            return -1
        if s0 > s1:
            return 1
        if shape[dim0] > shape[dim1]:
            return 1
    return 0


def iterator_strides(inputs: Sequence[torch.Tensor], shape: Sequence[int]) -> tuple[int, ...]:
    """Dense output strides of an element-wise op over `inputs` broadcast to `shape`."""
    ndim = len(shape)
    strides = [_broadcast_strides(t, shape) for t in inputs]
    perm = list(range(ndim - 1, -1, -1))  # innermost first
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            cmp = _should_swap(perm[dim0], perm[dim1], strides, shape)
            if cmp > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif cmp < 0:
                break
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(out)


def with_eager_strides(target: Callable[..., Any], fargs: tuple, fkwargs: dict, fake_out: Any,
                       fake_mode: FakeTensorMode) -> Any:
    """fake_out re-laid out in TensorIterator's strides, for an op of REFERENCE_LAYOUT_OPS (or of
    REDUCED_PRECISION_LAYOUT_OPS, over an expanded input in half precision)."""
    name = target.name() if isinstance(target, torch._ops.OpOverload) else None
    if name not in REFERENCE_LAYOUT_OPS and name not in REDUCED_PRECISION_LAYOUT_OPS:
        return fake_out
    if not isinstance(fake_out, torch.Tensor) or fake_out.dim() < 2:
        return fake_out
    inputs = [t for t in tree_flatten((fargs, fkwargs))[0] if isinstance(t, torch.Tensor) and t.dim() > 0]
    if name not in REFERENCE_LAYOUT_OPS and not _expanded_half(inputs):
        return fake_out
    if not inputs or all(t.is_contiguous() for t in inputs):
        return fake_out
    shape = tuple(int(s) for s in fake_out.shape)
    if tuple(torch.broadcast_shapes(*[t.shape for t in inputs])) != shape:
        return fake_out
    if fake_out.device.type == "cpu":
        inputs = _as_converted(inputs)
    stride = iterator_strides(inputs, shape)
    if all(a == b for a, b, n in zip(stride, fake_out.stride(), shape) if n != 1):
        return fake_out
    with fake_mode:
        return torch.empty_strided(shape, stride, dtype=fake_out.dtype, device=fake_out.device)


def _expanded_half(inputs: Sequence[torch.Tensor]) -> bool:
    """A float16 / bfloat16 input, and an input expanded (stride 0 over a dim of size > 1)."""
    return any(t.dtype in _HALVES for t in inputs) and \
        any(st == 0 and n > 1 for t in inputs for st, n in zip(t.stride(), t.shape))


def _as_converted(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The inputs as CPU TensorIterator orders dims by: one of another dtype than the common one is
    its converted copy, laid out as `Tensor.to` lays it out: its strides where dense, else dense
    strides in its dims' memory order (a transposed slice stays transposed), which an expanded
    dim leaves open (then row-major)."""
    common = inputs[0].dtype
    for t in inputs[1:]:
        common = torch.promote_types(common, t.dtype)
    out = []
    for t in inputs:
        if t.dtype != common and not is_dense(tuple(t.shape), t.stride()):
            shape = tuple(int(n) for n in t.shape)
            t = torch.empty_strided(shape, iterator_strides([t], shape), dtype=common, device="meta")
        out.append(t)
    return out
