"""Foreach ops (`torch._foreach_add`, ...) as one op per list element, for the decomposition table.

Note: torch.optim's multi-tensor ("foreach", the default on CUDA) optimizers and clip_grad_norm_
apply each step of an update to every parameter at once. Run as ATen, each foreach op is one
multi-tensor launch that reads and writes every parameter, so an AdamW step moves its state some
ten times. Split into per-element ops, a parameter's whole update is one pointwise chain that the
scheduler fuses into one kernel reading the parameter, its gradient and its moments once. The
overloads whose scalars come in a tensor (`_foreach_addcmul.Tensor`) keep ATen: their values are
read on the host.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

aten = torch.ops.aten

UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
         "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
         "sinh", "sqrt", "tan", "tanh", "trunc")
# binary foreach op -> the per-element op of its tensor and its scalar operands
BINARY: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "add": (torch.add, torch.add), "sub": (torch.sub, torch.sub), "mul": (torch.mul, torch.mul),
    "div": (torch.div, torch.div), "pow": (torch.pow, torch.pow),
    "clamp_min": (torch.clamp_min, torch.clamp_min), "clamp_max": (torch.clamp_max, torch.clamp_max),
    "maximum": (torch.maximum, torch.clamp_min), "minimum": (torch.minimum, torch.clamp_max),
}
POINTWISE3 = {"addcmul": torch.addcmul, "addcdiv": torch.addcdiv}


def _unary(fn: Callable[..., Any]) -> Callable[..., list]:
    return lambda self: [fn(x) for x in self]


def _binary_list(fn: Callable[..., Any]) -> Callable[..., list]:
    return lambda self, other, **kw: [fn(x, y, **kw) for x, y in zip(self, other)]


def _binary_one(fn: Callable[..., Any]) -> Callable[..., list]:
    """The `.Scalar` and `.Tensor` overloads: one operand for every element."""
    return lambda self, other, **kw: [fn(x, other, **kw) for x in self]


def _pointwise3(fn: Callable[..., Any], per_element: bool) -> Callable[..., list]:
    def run(self, t1, t2, value=1):
        values = value if per_element else [value] * len(self)
        return [fn(x, a, b, value=v) for x, a, b, v in zip(self, t1, t2, values)]
    return run


def _lerp(per_element: bool) -> Callable[..., list]:
    def run(self, end, weight):
        weights = weight if per_element else [weight] * len(self)
        return [torch.lerp(x, e, w) for x, e, w in zip(self, end, weights)]
    return run


def _overload(name: str, overload: str) -> Any:
    packet = getattr(aten, f"_foreach_{name}", None)
    return getattr(packet, overload, None) if packet is not None else None


def foreach_decompositions() -> dict:
    """Decompositions of the functional foreach overloads this torch has (AOTAutograd functionalizes
    the in-place ones, `_foreach_add_`, into these before it decomposes)."""
    table: dict = {}

    def put(name: str, overload: str, fn: Callable[..., list]) -> None:
        op = _overload(name, overload)
        if op is not None:
            table[op] = fn

    for name in UNARY:
        put(name, "default", _unary(getattr(torch, name)))
    put("zero", "default", _unary(torch.zeros_like))
    put("clone", "default", _unary(torch.clone))
    put("max", "default", _unary(torch.amax))
    put("norm", "Scalar", lambda self, ord=2, dtype=None: [torch.linalg.vector_norm(x, ord, dtype=dtype) for x in self])
    put("copy", "default", lambda self, src, non_blocking=False: [aten.copy.default(x, s) for x, s in zip(self, src)])
    for name, (tensor_fn, scalar_fn) in BINARY.items():
        put(name, "List", _binary_list(tensor_fn))
        put(name, "ScalarList", _binary_list(scalar_fn))
        put(name, "Scalar", _binary_one(scalar_fn))
        put(name, "Tensor", _binary_one(tensor_fn))
    put("pow", "ScalarAndTensor", lambda self, exponent: [torch.pow(self, e) for e in exponent])
    for name, fn in POINTWISE3.items():
        put(name, "Scalar", _pointwise3(fn, False))
        put(name, "ScalarList", _pointwise3(fn, True))
    put("lerp", "List", _lerp(True))
    put("lerp", "ScalarList", _lerp(True))
    put("lerp", "Scalar", _lerp(False))
    return table
