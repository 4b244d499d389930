"""View lowerings: index rewrites, never copies.

Note: a view of a value in memory whose layout equals eager's becomes a `ReinterpretView` with the
strides and offset eager computed (FakeTensor) — exact for every view op, as_strided included
(only when the FakeTensor output shares the input's storage: a reshape that copies is a rewrite).
A view of a lazy value rewrites the index its consumers load with, unless the graph returns the
view itself with a non-dense eager layout: then the value is realized with eager's layout and viewed.
`*_copy` variants (functionalization without views) are the view as a lazy value.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import sympy
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from ..ir.index import ModIndex, contiguous_strides, is_dense, make_vars, non_overlapping, row_major_vars, simplify_index
from ..ir.values import ComputedBuffer, Layout, Pointwise, PointwiseBody, ReinterpretView, strided_of
from .common import norm_dim
from .registry import LOWERINGS, Unsupported, register

aten = torch.ops.aten


def _same_layout(layout: Layout, fake: torch.Tensor) -> bool:
    if tuple(layout.size) != tuple(fake.shape):
        return False
    return all(sz == 1 or st == fst for sz, st, fst in zip(layout.size, layout.stride, fake.stride()))


def _strided_view(g: Any, x: Any, fout: Any = None) -> ReinterpretView | None:
    base = strided_of(x)
    fin = g.fake_arg(0)
    fout = g.out if fout is None else fout
    if base is None or not isinstance(fout, torch.Tensor) or not _same_layout(base[1], fin):
        return None
    if StorageWeakRef(fout.untyped_storage()) != StorageWeakRef(fin.untyped_storage()):
        return None  # not a view of the input (reshape of a non-viewable layout copies)
    buf, layout = base
    offset = layout.offset + int(fout.storage_offset()) - int(fin.storage_offset())
    if offset < 0:
        return None
    new = Layout(layout.device, layout.dtype, tuple(int(s) for s in fout.shape), tuple(int(s) for s in fout.stride()), offset)
    return ReinterpretView(buf, new)


def _rewrite(g: Any, x: Any, index_fn, size: Sequence[int] | None = None) -> Pointwise:
    inner = x.loader()
    size = tuple(int(s) for s in (g.out.shape if size is None else size))
    index_fn = _simplified_once(index_fn, size)
    return Pointwise(x.device, x.dtype, size, lambda ops, idx: inner(ops, index_fn(list(idx))),
                     getattr(x, "origins", frozenset()))


def _simplified_once(index_fn, size: Sequence[int]):
    """index_fn applied once to symbols of the view's ranges and simplified with them; each call
    substitutes its indices. A chain of views otherwise nests every level's divisions and remainders
    unsimplified into the next (MaxViT's window and grid partitions: indices of thousands of terms,
    rebuilt at each of the many loads of the graph's analysis and code generation). A position outside
    the ranges is only ever loaded under a mask, where its address is not used."""
    syms = make_vars("v", len(size))
    ranges = dict(zip(syms, size))
    exprs = [simplify_index(sympy.sympify(e), ranges) for e in index_fn(list(syms))]

    def fn(idx: list) -> list:
        sub = {s: sympy.sympify(i) for s, i in zip(syms, idx)}
        return [e.xreplace(sub) for e in exprs]
    return fn


def _returned_view_of_lazy(g: Any, x: Any, fakes: Sequence[Any]) -> Any:
    """A view the graph returns (directly or through getitem) whose eager layout is not dense: a lazy
    value would be realized contiguous, so realize the viewed value with the layout eager gives it
    (strides of its FakeTensor, holes included when it is itself a view) and return the strided view
    of that buffer instead, with eager's strides. None when not applicable."""
    node = g.node
    if node is None or g.fake_env.get(node) is not g.out or not isinstance(x, Pointwise):
        return None  # *_copy variants (g.out is then the view's fake) return fresh contiguous tensors
    users = list(node.users)
    returned = any(u.op == "output" for u in users) or any(
        u.target is operator.getitem and any(uu.op == "output" for uu in u.users) for u in users)
    if not returned or all(is_dense(tuple(f.shape), f.stride()) for f in fakes):
        return None
    fin = g.fake_arg(0)
    size, stride = tuple(int(s) for s in x.size), tuple(int(s) for s in fin.stride())
    if tuple(fin.shape) != size:
        return None
    broadcast = g.realize_broadcast(x, fin)
    if broadcast is not None:
        return broadcast
    if not non_overlapping(size, stride):
        return None
    if is_dense(size, stride):
        return g.realize(x, fin)
    layout = Layout(x.device, x.dtype, size, stride, 0)
    return g.add_computed(ComputedBuffer(g.new_name(), layout, PointwiseBody(size, x.inner_fn), x.origins))


def _view_of_padded(g: Any, x: Any) -> ReinterpretView | None:
    """The node's view of a padded product's result (lower/matmul.py), as strides over the padded
    buffer: eager's fakes know the product unpadded, so the view is taken of a meta tensor laid out
    as the buffer is. None when x is not such a view or the op cannot view that layout."""
    base = strided_of(x)
    node = g.node
    if base is None or base[0].name not in g.padded_rows or node is None \
            or any(isinstance(a, torch.fx.Node) for a in list(node.args[1:]) + list(node.kwargs.values())):
        return None
    buf, layout = base
    meta = torch.empty_strided(layout.size, layout.stride, dtype=layout.dtype, device="meta")
    try:
        out = node.target(meta, *node.args[1:], **node.kwargs)
    except RuntimeError:   # not viewable in these strides
        return None
    if not isinstance(out, torch.Tensor) or (out is not meta and out._base is not meta):
        return None   # a copy, not a view
    return ReinterpretView(buf, Layout(layout.device, layout.dtype, tuple(int(s) for s in out.shape),
                                       tuple(int(s) for s in out.stride()), layout.offset + int(out.storage_offset())))


def view_op(index_fn_builder):
    """Register-ready lowering: strided fast path, else index rewrite built from the args."""
    def lower(g, x, *args, **kwargs):
        v = _strided_view(g, x)
        if v is not None:
            return v
        v = _view_of_padded(g, x)
        if v is not None:
            return v
        real = _returned_view_of_lazy(g, x, [g.out])
        if real is not None:
            v = _strided_view(g, real)
            if v is not None:
                return v
        return _rewrite(g, x, index_fn_builder(g, x, *args, **kwargs))
    return lower


def _reshape_index(old_size: Sequence[int], new_size: Sequence[int]):
    old_size, new_size = list(old_size), list(new_size)

    def fn(idx):
        flat = sympy.Integer(0)
        for i, st in zip(idx, contiguous_strides(new_size)):
            flat = flat + i * st
        return row_major_vars(flat, old_size) if old_size else []
    return fn


@register(aten.view, aten._unsafe_view, aten.reshape)
def _view(g, x, shape):
    if isinstance(g.out, torch.Tensor) and g.out.dtype != x.dtype:
        raise Unsupported("view as another dtype")
    return view_op(lambda g, x, shape: _reshape_index(x.size, g.out.shape))(g, x, shape)


@register(aten.permute)
def _permute(g, x, dims):
    dims = [norm_dim(d, len(x.size)) for d in dims]

    def fn(idx):
        out = [None] * len(dims)
        for new_pos, old_pos in enumerate(dims):
            out[old_pos] = idx[new_pos]
        return out
    return view_op(lambda *a: fn)(g, x, dims)


@register(aten.t, aten.transpose)
def _transpose(g, x, d0=0, d1=1):
    n = len(x.size)
    if n < 2:
        return view_op(lambda *a: (lambda idx: idx))(g, x)
    d0, d1 = norm_dim(d0, n), norm_dim(d1, n)

    def fn(idx):
        idx = list(idx)
        idx[d0], idx[d1] = idx[d1], idx[d0]
        return idx
    return view_op(lambda *a: fn)(g, x)


@register(aten.expand)
def _expand(g, x, size, implicit=False):
    in_size = list(x.size)
    lead = len(g.out.shape) - len(in_size)

    def fn(idx):
        return [sympy.Integer(0) if s == 1 else idx[lead + k] for k, s in enumerate(in_size)]
    return view_op(lambda *a: fn)(g, x)


@register(aten.squeeze)
def _squeeze(g, x, dims=None):
    in_size = list(x.size)
    if dims is None:
        drop = {k for k, s in enumerate(in_size) if s == 1}
    else:
        dims = [dims] if isinstance(dims, int) else dims
        drop = {norm_dim(d, len(in_size)) for d in dims if in_size and in_size[norm_dim(d, len(in_size))] == 1}

    def fn(idx):
        it = iter(idx)
        return [sympy.Integer(0) if k in drop else next(it) for k in range(len(in_size))]
    return view_op(lambda *a: fn)(g, x)


@register(aten.unsqueeze)
def _unsqueeze(g, x, dim):
    d = norm_dim(dim, len(x.size) + 1)

    def fn(idx):
        return idx[:d] + idx[d + 1:]
    return view_op(lambda *a: fn)(g, x)


@register(aten.slice)
def _slice(g, x, dim=0, start=None, end=None, step=1):
    n = len(x.size)
    d = norm_dim(dim, n)
    length = x.size[d]
    s = 0 if start is None else start
    s = max(0, min(length, s + length if s < 0 else s))

    def fn(idx):
        idx = list(idx)
        idx[d] = s + step * idx[d]
        return idx
    return view_op(lambda *a: fn)(g, x)


@register(aten.select)
def _select(g, x, dim, index):
    n = len(x.size)
    d = norm_dim(dim, n)
    i = index + x.size[d] if index < 0 else index

    def fn(idx):
        return list(idx[:d]) + [sympy.Integer(i)] + list(idx[d:])
    return view_op(lambda *a: fn)(g, x)


@register(aten.flip)
def _flip(g, x, dims):
    """A copy in eager, an index rewrite here: position p of a flipped dim of size n reads n - 1 - p."""
    size = list(x.size)
    flipped = {norm_dim(d, len(size)) for d in dims}

    def fn(idx):
        return [sympy.Integer(size[k] - 1) - i if k in flipped else i for k, i in enumerate(idx)]
    return _rewrite(g, x, fn)


@register(aten.repeat)
def _repeat(g, x, repeats):
    """A copy in eager, an index rewrite here: the output's position p along a dim of input size n
    reads p mod n (InstanceNorm repeats its affine weights over the batch this way)."""
    size = list(x.size)
    lead = len(repeats) - len(size)
    reps = list(repeats)[lead:]

    def fn(idx):
        out = []
        for k, (n, r) in enumerate(zip(size, reps)):
            i = idx[lead + k]
            # an empty input dim makes the output empty: nothing reads the index
            out.append(sympy.Integer(0) if n <= 1 else i if r == 1 else ModIndex(i, n))
        return out
    return _rewrite(g, x, fn)


@register(aten.as_strided)
def _as_strided(g, x, size, stride, storage_offset=None):
    v = _strided_view(g, x)
    if v is not None:
        return v
    real = g.realize(x, g.fake_arg(0))
    v = _strided_view(g, real)
    if v is None:
        raise Unsupported("as_strided of a non-strided value")
    return v


@register(aten.unfold, aten.diagonal)
def _strided_only(g, x, *args, **kwargs):
    out = g.out
    if isinstance(out, torch.Tensor):
        v = _strided_view(g, x)
        if v is None:
            real = g.realize(x, g.fake_arg(0))
            v = _strided_view(g, real)
        if v is None:
            raise Unsupported("view of a non-strided value")
        return v
    raise Unsupported("multi-output view")


@register(aten.narrow)
def _narrow(g, x, dim, start, length):
    if not isinstance(start, int):
        raise Unsupported("tensor start")
    n = len(x.size)
    d = norm_dim(dim, n)
    s = start + x.size[d] if start < 0 else start

    def fn(idx):
        idx = list(idx)
        idx[d] = s + idx[d]
        return idx
    return view_op(lambda *a: fn)(g, x)


def _pieces(g: Any, x: Any, d: int, offsets: Sequence[int], select: bool) -> list:
    """One view per fake output of a multi-output view op: slices along d starting at offsets
    (or, with select, the single index offsets[k] with dim d dropped)."""
    outs = []
    x = _returned_view_of_lazy(g, x, list(g.out)) or x
    for fake, off in zip(g.out, offsets):
        v = _strided_view(g, x, fake)
        if v is None:
            if select:
                def fn(idx, off=off):
                    return list(idx[:d]) + [sympy.Integer(off)] + list(idx[d:])
            else:
                def fn(idx, off=off):
                    idx = list(idx)
                    idx[d] = idx[d] + off
                    return idx
            # lists are not tagged by GraphLowering: name the op in the pieces' origins here
            v = _rewrite(g, x, fn, fake.shape).with_origins(g.current_origins())
        outs.append(v)
    return outs


@register(aten.split_with_sizes, aten.split)
def _split(g, x, split, dim=0):
    if not isinstance(g.out, (list, tuple)):
        raise Unsupported("split signature")
    d = norm_dim(dim, len(x.size))
    offsets, off = [], 0
    for fake in g.out:
        offsets.append(off)
        off += int(fake.shape[d])
    return _pieces(g, x, d, offsets, select=False)


@register(aten.unbind)
def _unbind(g, x, dim=0):
    d = norm_dim(dim, len(x.size))
    return _pieces(g, x, d, list(range(x.size[d])), select=True)


# ---- *_copy variants ---------------------------------------------------------------------------
# Functionalization with views removed (capture/trace.py) turns views into `*_copy` ops: the same
# index rewrite, but the result is a new tensor with contiguous strides (eager's *_copy). They are
# lowered as the view (computed against the view's own FakeTensor) wrapped in a lazy Pointwise, so
# a consumer reads through the view and a realized copy gets the copy op's layout.

def _as_pointwise(v: Any, origins: frozenset[str]) -> Any:
    if isinstance(v, (list, tuple)):  # GraphLowering tags single results only
        return [_as_pointwise(p, origins).with_origins(origins) for p in v]
    if isinstance(v, Pointwise):
        return v
    return Pointwise(v.device, v.dtype, tuple(v.size), v.loader(), frozenset())


def _copy_of(view_packet):
    # view_copy takes any layout (it is reshape + copy): its fake "view" is a reshape, a copy itself when
    # the input cannot be viewed, which _strided_view then declines (index rewrite instead)
    fake_packet = aten.reshape if view_packet in (aten.view, aten.reshape) else view_packet

    def lower(g, x, *args, **kwargs):
        view_lowering = LOWERINGS.lookup(view_packet)
        if view_lowering is None:
            raise Unsupported("no view lowering")
        with g.fake_mode:
            fake_view = fake_packet(g.fake_arg(0), *args, **kwargs)
        saved = g.out
        g.out = fake_view
        try:
            v = view_lowering(g, x, *args, **kwargs)
        finally:
            g.out = saved
        return _as_pointwise(v, g.current_origins())
    return lower


COPY_VARIANTS = {
    "view_copy": aten.view, "_reshape_copy": aten.reshape, "permute_copy": aten.permute,
    "transpose_copy": aten.transpose, "t_copy": aten.t, "expand_copy": aten.expand, "squeeze_copy": aten.squeeze,
    "unsqueeze_copy": aten.unsqueeze, "slice_copy": aten.slice, "select_copy": aten.select,
    "as_strided_copy": aten.as_strided, "narrow_copy": aten.narrow, "diagonal_copy": aten.diagonal,
    "unfold_copy": aten.unfold, "split_copy": aten.split, "split_with_sizes_copy": aten.split_with_sizes,
    "unbind_copy": aten.unbind,
}
for _name, _packet in COPY_VARIANTS.items():
    if hasattr(aten, _name):
        register(getattr(aten, _name))(_copy_of(_packet))
