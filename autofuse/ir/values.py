"""IR values: layouts, realized buffers, strided views and lazy pointwise/reduction/scan bodies.

Note: a lazy value is a function of sympy index variables evaluated through an `OpsHandler`
(codegen, dependency recording, op counting all run the same body). Views are index rewrites of
their input's loader; a view of a realized buffer that is still expressible as (size, stride,
offset) stays a `ReinterpretView`, so ATen fallbacks receive it without a copy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

import sympy
import torch

from .index import Expr, contiguous_strides, prod

Loader = Callable[["OpsHandler", Sequence[Expr]], object]  # noqa: F821


@dataclass(frozen=True)
class Layout:
    """Where a tensor's elements live: element (i0..in) is at offset + sum(i_k * stride_k)."""

    device: torch.device
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(device: torch.device, dtype: torch.dtype, size: Sequence[int]) -> "Layout":
        size = tuple(int(s) for s in size)
        return Layout(device, dtype, size, contiguous_strides(size), 0)

    @staticmethod
    def like(t: torch.Tensor, offset: int = 0) -> "Layout":
        return Layout(t.device, t.dtype, tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()), offset)

    def index(self, idx: Sequence[Expr]) -> Expr:
        expr = sympy.Integer(self.offset)
        for i, st, sz in zip(idx, self.stride, self.size):
            if sz != 1 and st != 0:
                expr = expr + i * st
        return expr

    @property
    def numel(self) -> int:
        return prod(self.size)

    def storage_span(self) -> int:
        """Elements from the base pointer needed to hold every addressed element."""
        if self.numel == 0:
            return 0
        return self.offset + 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))

    def is_contiguous(self) -> bool:
        return all(st == cs for st, cs, sz in zip(self.stride, contiguous_strides(self.size), self.size) if sz != 1)


@dataclass(eq=False)
class Buffer:
    """A realized tensor in memory: a graph input, a computed kernel output, or an ATen result."""

    name: str
    layout: Layout

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype

    @property
    def device(self) -> torch.device:
        return self.layout.device

    @property
    def size(self) -> tuple[int, ...]:
        return self.layout.size

    def loader(self) -> Loader:
        name, layout = self.name, self.layout
        return lambda ops, idx: ops.load(name, layout.index(idx))


@dataclass(eq=False)
class InputBuffer(Buffer):
    index: int = 0


@dataclass(frozen=True)
class PointwiseBody:
    """out[idx] = inner_fn(ops, idx) over `size`."""

    size: tuple[int, ...]
    inner_fn: Loader


@dataclass(frozen=True)
class ReductionBody:
    """out[idx] = reduce_{ridx} inner_fn(ops, idx, ridx); `size` is the output's, `rsize` the reduced dims'."""

    size: tuple[int, ...]
    rsize: tuple[int, ...]
    reduction_type: str
    inner_fn: Callable[..., object]
    src_dtype: torch.dtype


@dataclass(frozen=True)
class ColumnPartialBody(ReductionBody):
    """Partial sums of a column reduction over `rows` rows, one row of partials per program of a
    row reduction's kernel that reads the same rows (lower/column_partials.py): `size` is
    (programs, *the columns), `rsize` (rows // programs,). out[p, c] sums rows [p * rows_per,
    (p + 1) * rows_per) of column c; a second reduction sums the programs' partials."""

    rows: int = 0

    @property
    def programs(self) -> int:
        return self.size[0]


# a row sort's combines (ScanBody): (descending, the positions instead of the values)
SORTS = {"sort": (False, False), "sort_descending": (True, False),
         "argsort": (False, True), "argsort_descending": (True, True)}


@dataclass(frozen=True)
class ScanBody:
    """out[idx] = combine of inner_fn(ops, j) over the positions j along `dim` up to idx's (from idx's
    on when `reverse`), in `acc_dtype`. `combine`: "sum", "prod", "logaddexp", "max" or "min"; or
    "argmax" / "argmin": the position along `dim` of that max / min (cummax's and cummin's indices);
    or one of SORTS: out[idx] is the row's element of rank idx along `dim` (`acc_dtype` f32, int32,
    f64 or int64, the keys it is ordered by), or (argsort) that element's position; the whole row in one
    block.
    A scan iterates its tensor with `dim` moved last (`iter_size`): the kernel's rows are the other
    dims and its r loop runs along `dim`."""

    size: tuple[int, ...]
    dim: int
    combine: str
    inner_fn: Loader
    acc_dtype: torch.dtype
    reverse: bool = False

    @property
    def iter_size(self) -> tuple[int, ...]:
        return self.size[: self.dim] + self.size[self.dim + 1:] + (self.size[self.dim],)

    def position(self, ivars: Sequence[Expr]) -> list[Expr]:
        """The tensor index of the iteration variables (the scanned dim's variable last)."""
        ivars = list(ivars)
        return ivars[: self.dim] + [ivars[-1]] + ivars[self.dim:-1]


@dataclass(frozen=True)
class ScatterBody:
    """out[position(idx)] += inner_fn(idx) for every idx of `size`, as atomic adds into `target`, a
    buffer of the output's layout that holds the values added to (zeros, or a copy of the tensor
    updated) and dies there: the program stores the output in the target's memory. `position`
    returns the output index of an iteration point, indirect symbols included (index_put,
    index_add, scatter_add). Why atomics: repeated indices (an embedding's gradient over a batch
    of tokens) add up without sorting them, in a kernel that can be the epilogue of the one
    computing the values. `reduce` "amax" / "amin" combine by atomic max / min instead
    (scatter_reduce); None stores, out[position(idx)] = inner_fn(idx) (index_put without
    accumulate, index_copy: a static KV cache written at new positions; which of repeated indices
    wins is unspecified, as in eager). A store whose positions cover every element of the output
    (a permutation: a counting sort's) has no target (None): the output is allocated, not filled
    first by a kernel of its own."""

    size: tuple[int, ...]
    inner_fn: Loader
    position: Callable[..., Sequence[Expr]]
    target: str | None
    reduce: str | None = "sum"


@dataclass(eq=False)
class ComputedBuffer(Buffer):
    """A buffer written by a generated kernel."""

    body: Union[PointwiseBody, ReductionBody, ScanBody, ScatterBody] = None  # type: ignore[assignment]
    origins: frozenset[str] = frozenset()
    node_id: str = ""  # stable id: the FX node it was lowered from, and its index among that node's buffers

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body, ReductionBody)

    @property
    def is_scan(self) -> bool:
        return isinstance(self.body, ScanBody)

    @property
    def is_column_partial(self) -> bool:
        return isinstance(self.body, ColumnPartialBody)

    @property
    def is_scatter(self) -> bool:
        return isinstance(self.body, ScatterBody)


@dataclass(eq=False)
class ExternBuffer(Buffer):
    """An output of an ATen fallback kernel."""

    kernel: "ExternKernel" = None  # type: ignore[assignment]


@dataclass(eq=False)
class ExternKernel:
    """An ATen op run as-is inside the compiled graph; fusion breaks around it."""

    name: str
    op: object
    args: tuple
    kwargs: dict
    outputs: list  # nested structure of ExternBuffer | None
    reads: list[str] = field(default_factory=list)
    origins: frozenset[str] = frozenset()
    is_mutating: bool = False
    node_id: str = ""


@dataclass(frozen=True)
class ReinterpretView:
    """A strided view of a realized buffer (no copy)."""

    buffer: Buffer
    layout: Layout

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype

    @property
    def device(self) -> torch.device:
        return self.layout.device

    @property
    def size(self) -> tuple[int, ...]:
        return self.layout.size

    def loader(self) -> Loader:
        name, layout = self.buffer.name, self.layout
        return lambda ops, idx: ops.load(name, layout.index(idx))


@dataclass(frozen=True)
class Pointwise:
    """A lazy value: not in memory; its body is inlined into each consumer."""

    device: torch.device
    dtype: torch.dtype
    size: tuple[int, ...]
    inner_fn: Loader
    origins: frozenset[str] = frozenset()

    def loader(self) -> Loader:
        return self.inner_fn

    def with_origins(self, origins: frozenset[str]) -> "Pointwise":
        return dataclasses.replace(self, origins=self.origins | origins)


TensorValue = Union[Buffer, ReinterpretView, Pointwise]


def is_tensor_value(v: object) -> bool:
    return isinstance(v, (Buffer, ReinterpretView, Pointwise))


def strided_of(v: TensorValue) -> tuple[Buffer, Layout] | None:
    """(base buffer, layout relative to it) when v is addressable as strides over a buffer."""
    if isinstance(v, Buffer):
        return v, v.layout
    if isinstance(v, ReinterpretView):
        return v.buffer, v.layout
    return None
