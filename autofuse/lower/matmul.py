"""Matrix products (mm, addmm, bmm): extern cuBLAS kernels, with operands padded where a row
length would break the 16-byte alignment that cuBLAS's fast kernels need.

Note: cuBLAS picks its tensor-core kernels only when every leading dimension is a multiple of 16
bytes. A product whose K or N is not (GPT-2's vocabulary of 50257 in its output projection; a
hidden size of 1001) runs an alignment-1 kernel: measured on the H200, bf16 2048×1024 @ 1024×50257
takes 2.29 ms against 0.34 ms once the weight is padded to 50264 columns (0.41 ms with the padding
copy). The lowering writes the unaligned operands into zero-padded buffers (K padded in both
operands adds zero products; N padded in the second adds columns nobody reads), calls the extern
kernel on them and reads the result back as a view of the first N columns. A graph output that
is such a view (GPT-2's logits) is returned as it is, with its padded row stride, as torch.compile
returns it (Inductor's pad_mm slices the padded product): copied into eager's strides, the logits
of a 4 x 512-token batch cost a second buffer of 196 MiB (bf16) at the forward's peak and a 110 µs
copy. Exact: the padded products are zeros that are never read. Whether to pad is
`Heuristics.pad_matmul` (large products on CUDA only: a small one is memory-bound, and the padding
copy would cost more than the kernel gains).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..ir.values import Layout, Pointwise, ReinterpretView, is_tensor_value
from .registry import Unsupported, register

aten = torch.ops.aten
ALIGN_BYTES = 16


def aligned_extent(n: int, dtype: torch.dtype) -> int:
    """n rounded up to a multiple of 16 bytes' worth of `dtype` elements."""
    per = max(ALIGN_BYTES // dtype.itemsize, 1)
    return -(-n // per) * per


def _order(value: Any) -> tuple[int, ...]:
    """The value's dims from outermost to innermost in memory (logical order for a lazy value)."""
    layout = getattr(value, "layout", None)
    nd = len(value.size)
    if layout is None:
        return tuple(range(nd))
    return tuple(sorted(range(nd), key=lambda d: (-layout.stride[d] if value.size[d] != 1 else 0, d)))


def _strides(size: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    stride = [0] * len(size)
    acc = 1
    for d in reversed(order):
        stride[d] = acc
        acc *= max(int(size[d]), 1)
    return tuple(stride)


def _padded(g: Any, value: Any, size: tuple[int, ...]) -> Any:
    """`value` written into a zero-padded buffer of `size`, in the value's own memory order (so
    the copy's loads and stores are both contiguous)."""
    have = tuple(int(s) for s in value.size)
    if have == size:
        return g.realize(value)
    stored = _zero_padded_buffer(g, value, size)
    if stored is not None:
        return stored
    load = value.loader()
    grown = [d for d in range(len(size)) if size[d] != have[d]]

    def inner(ops, idx):
        cond = None
        for d in grown:
            c = ops.lt(ops.index_expr(idx[d], torch.int64), ops.constant(have[d], torch.int64))
            cond = c if cond is None else ops.logical_and(cond, c)
        return ops.masked(cond, lambda: load(ops, idx), 0)

    order = _order(value)
    padded = Pointwise(value.device, value.dtype, size, inner, getattr(value, "origins", frozenset()))
    return g.realize_in_order(padded, order, _strides(size, order))


def _zero_padded_buffer(g: Any, value: Any, size: tuple[int, ...]) -> Any:
    """The buffer of `value` when it is a view of the first columns of a buffer of `size` whose
    padding holds zeros (g.padded_rows): a padded operand needs no copy then."""
    if not isinstance(value, ReinterpretView) or value.buffer.name not in g.padded_rows:
        return None
    buf = value.buffer
    same = tuple(buf.layout.size) == size and value.layout.stride == buf.layout.stride
    return buf if same and value.layout.offset == buf.layout.offset == 0 else None


def _fake(g: Any, value: Any) -> torch.Tensor:
    lay = getattr(value, "layout", None)
    size = tuple(int(s) for s in value.size)
    stride = tuple(lay.stride) if lay is not None else _strides(size, range(len(size)))
    with g.fake_mode:
        return torch.empty_strided(size, stride, dtype=value.dtype, device=value.device)


def _product(g: Any, op: Any, a: Any, b: Any, bias: Any = None, scalars: dict | None = None) -> Any:
    """op(a, b) (a: [..., M, K], b: [..., K, N]) with K and N padded when the heuristics ask."""
    if not (is_tensor_value(a) and is_tensor_value(b)) or (bias is not None and not is_tensor_value(bias)):
        raise Unsupported("matrix product operands")
    *batch, m, k = (int(s) for s in a.size)
    n = int(b.size[-1])
    dtype = a.dtype
    if b.dtype != dtype or not g.heuristics.pad_matmul(a.device, dtype, m, k, n, batch):
        raise Unsupported("aligned or small: the plain extern call is the lowering")
    kp, np_ = aligned_extent(k, dtype), aligned_extent(n, dtype)
    a = _padded(g, a, (*batch, m, kp))
    b = _padded(g, b, (*batch, kp, np_))
    args: tuple = (a, b)
    if bias is not None:
        bsize = tuple(int(s) for s in bias.size)
        if bsize and bsize[-1] == n and np_ != n:
            bias = _padded(g, bias, (*bsize[:-1], np_))
        args = (bias, a, b)
    with g.fake_mode:
        fake = op(*(_fake(g, x) for x in args), **(scalars or {}))
    out = g.fallback(op, args, dict(scalars or {}), fake)
    if np_ == n:
        return out
    g.padded_rows.add(out.name)
    lay = out.layout
    return ReinterpretView(out, Layout(lay.device, lay.dtype, (*batch, m, n), tuple(lay.stride), lay.offset))


@register(aten.mm.default)
def _mm(g, a, b):
    return _product(g, aten.mm.default, a, b)


@register(aten.bmm.default)
def _bmm(g, a, b):
    return _product(g, aten.bmm.default, a, b)


@register(aten.addmm.default)
def _addmm(g, bias, a, b, *, beta=1, alpha=1):
    scalars = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
    return _product(g, aten.addmm.default, a, b, bias, scalars)
