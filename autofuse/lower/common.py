"""Helpers shared by lowerings: loaders with broadcasting, compute dtypes, pointwise construction."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import sympy
import torch

from ..ir.index import Expr
from ..ir.values import Pointwise, TensorValue, is_tensor_value
from .registry import Unsupported

LOW_PRECISION = (torch.float16, torch.bfloat16)


def upcast(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value is computed in inside a kernel (half types are computed in f32)."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def origins_of(*values: Any) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for v in values:
        if isinstance(v, Pointwise):
            out |= v.origins
    return out


def broadcast_loader(value: Any, out_size: Sequence[int], dtype: torch.dtype,
                     round_to: torch.dtype | None = None) -> Callable[[Any, Sequence[Expr]], Any]:
    """Loader over `out_size` for a tensor value (right-aligned broadcasting) or a Python scalar,
    returning values cast to `dtype`; a float tensor of another dtype than `round_to` is rounded to
    `round_to` on the way (eager's cast of every operand to the op's common dtype)."""
    if is_tensor_value(value):
        inner = value.loader()
        in_size = tuple(value.size)
        lead = len(out_size) - len(in_size)
        if lead < 0:
            raise Unsupported("input has more dims than output")
        src_dtype = value.dtype

        rounded = round_to is not None and src_dtype.is_floating_point and src_dtype != round_to

        def load(ops, idx):
            sub = [sympy.Integer(0) if s == 1 else idx[lead + k] for k, s in enumerate(in_size)]
            v = inner(ops, sub)
            if rounded:
                return ops.to_dtype(ops.to_dtype(v, round_to), dtype)
            return v if upcast(src_dtype) == dtype else ops.to_dtype(v, dtype)

        return load
    if isinstance(value, (bool, int, float)):
        v = scalar_value(value, dtype)
        return lambda ops, idx: ops.constant(v, dtype)
    raise Unsupported(f"operand of type {type(value).__name__}")


def scalar_value(value: bool | int | float, dtype: torch.dtype) -> bool | int | float:
    """A Python scalar as the value it has once cast to `dtype`, like eager's cast of a wrapped number:
    integers wrap around (-1 is 255 as uint8), bool is truthiness, floats stay Python floats."""
    if dtype == torch.bool:
        return bool(value)
    if not dtype.is_floating_point:
        return int(torch.tensor(value).to(dtype).item())
    return value


def round_scalar(value: bool | int | float, dtype: torch.dtype) -> bool | int | float:
    """A Python scalar rounded to a half-precision dtype (the value eager compares with)."""
    if dtype in LOW_PRECISION and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(torch.tensor(value, dtype=dtype).item())
    return value


def make_pointwise(g: Any, inputs: Sequence[Any], fn: Callable[..., Any], compute_dtype: torch.dtype,
                   out: torch.Tensor | None = None, round_to: torch.dtype | None = None) -> Pointwise:
    """out[idx] = fn(ops, *inputs[idx]) with inputs cast to compute_dtype (float tensors of another
    dtype than `round_to` rounded to it first), result cast to out's dtype."""
    out = g.out if out is None else out
    if not isinstance(out, torch.Tensor):
        raise Unsupported("non-tensor output")
    size = tuple(int(s) for s in out.shape)
    loaders = [broadcast_loader(v, size, compute_dtype, round_to) for v in inputs]
    result_dtype = upcast(out.dtype)
    fn_dtype = getattr(fn, "result_dtype", compute_dtype)

    def inner(ops, idx):
        r = fn(ops, *[ld(ops, idx) for ld in loaders])
        return r if fn_dtype == result_dtype else ops.to_dtype(r, result_dtype)

    return Pointwise(out.device, out.dtype, size, inner, origins_of(*inputs))


def returns_bool(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn.result_dtype = torch.bool  # type: ignore[attr-defined]
    return fn


def promoted_dtype(*fakes: Any) -> torch.dtype:
    """torch's result dtype of the operands (tensors and Python scalars)."""
    vals = [f for f in fakes if isinstance(f, (torch.Tensor, bool, int, float))]
    if not vals:
        raise Unsupported("no operands")
    if len(vals) == 1:
        v = vals[0]
        return v.dtype if isinstance(v, torch.Tensor) else torch.result_type(torch.tensor(0), v)
    dt = torch.result_type(vals[0], vals[1])
    for v in vals[2:]:
        dt = torch.promote_types(dt, torch.result_type(v, v) if not isinstance(v, torch.Tensor) else v.dtype)
    return dt


def as_int_list(v: Any) -> list[int]:
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def norm_dim(d: int, ndim: int) -> int:
    nd = max(ndim, 1)
    if d < -nd or d >= nd:
        raise Unsupported("dim out of range")
    return d % nd if ndim > 0 else 0


def tensor_dtype(v: Any, fallback: torch.dtype) -> torch.dtype:
    return v.dtype if is_tensor_value(v) else fallback


TensorLike = TensorValue


def chunk_view(x: Any, d: int, chunk: int, acc: torch.dtype, pad: bool | int | float,
               origins: frozenset[str]) -> Pointwise:
    """x with dim d cut into rows of `chunk` (d becomes two dims, chunks and positions in a chunk),
    in `acc`; positions past d's end read `pad`, by a masked load. What a scan or an arg-reduction
    over a few long rows runs over, one program per chunk."""
    size = tuple(x.size)
    n = size[d]
    b = -(-n // chunk)
    loader, src = x.loader(), upcast(x.dtype)

    def element(ops, idx):
        pos = idx[d] * chunk + idx[d + 1]

        def load():
            v = loader(ops, list(idx[:d]) + [pos] + list(idx[d + 2:]))
            return v if src == acc else ops.to_dtype(v, acc)
        if b * chunk == n:
            return load()
        return ops.masked(ops.lt(ops.index_expr(pos, torch.int64), ops.constant(n, torch.int64)), load, pad)

    return Pointwise(x.device, acc, size[:d] + (b, chunk) + size[d + 1:], element, origins)
