"""A captured graph computed in float64: the reference a bf16 or f16 plan's error is measured against.

Casting the graph's inputs is not enough. A model's graph names its dtypes: RMSNorm's
`.to(torch.float32)` and `.to(input_dtype)` are `_to_copy` nodes with a constant dtype, tensors
are created with `dtype=torch.bfloat16`. Run as captured, such a graph rounds to bf16 at every one
of those nodes, as eager does, so eager looks closer to it than a plan that keeps an f32
intermediate. Here every floating dtype the graph names becomes float64 too, and fused attention
kernels (which take no float64) run as the math they compute.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import torch
import torch.fx
import torch.nn.functional as F
from torch.utils._pytree import tree_map

aten = torch.ops.aten

_ATTENTION = tuple(getattr(aten, name).default for name in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    if hasattr(aten, name))
_LOW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class CannotPromote(Exception):
    """The graph has a node whose float64 form would not compute the same thing."""


def _promote(a: Any) -> Any:
    return torch.float64 if isinstance(a, torch.dtype) and a in _LOW_FLOATS else a


def _bind(target: torch._ops.OpOverload, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = {a.name: a.default_value for a in target._schema.arguments if a.has_default_value()}
    bound.update(zip((a.name for a in target._schema.arguments), args))
    bound.update(kwargs)
    return bound


def _attention(node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple:
    """A fused attention kernel's first output (the attention) in float64, laid out as the kernel
    lays it out (the graph's views after it rely on those strides)."""
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        raise CannotPromote(f"{node.target} outputs other than the attention are used")
    b = _bind(node.target, args, kwargs)
    if b.get("dropout_p", 0.0):
        raise CannotPromote("attention with dropout")
    q, k, v = b["query"], b["key"], b["value"]
    mask = b.get("attn_bias", b.get("attn_mask"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=bool(b.get("is_causal", False)),
                                         scale=b.get("scale"), enable_gqa=q.size(-3) != k.size(-3))
    val = node.meta.get("val")
    if not isinstance(val, (tuple, list)) or not isinstance(val[0], torch.Tensor):
        raise CannotPromote(f"{node.target} has no recorded output layout")
    first = torch.empty_strided(tuple(val[0].shape), tuple(val[0].stride()), dtype=torch.float64, device=out.device)
    return (first.copy_(out),) + (None,) * (len(val) - 1)


def _captured(arg: Any, value: Any) -> Any:
    """value in the dtype the graph recorded for arg."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if isinstance(value, torch.Tensor) and isinstance(val, torch.Tensor) and value.dtype != val.dtype:
        return value.to(val.dtype)
    return value


class _Float64(torch.fx.Interpreter):
    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        if n.target is aten.view.dtype:
            raise CannotPromote("a bitcast (view.dtype) reads the bits of its dtype")
        if n.target in _ATTENTION:
            return _attention(n, args, kwargs)
        if isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags:
            # random draws in the captured dtypes: the same numbers as eager's
            return n.target(*map(_captured, n.args, args), **{k: _captured(n.kwargs[k], v) for k, v in kwargs.items()})
        return n.target(*tree_map(_promote, args), **tree_map(_promote, kwargs))


def float64_graph_outputs(gm: torch.fx.GraphModule, args: Sequence[Any]) -> list[Any]:
    """The graph's outputs computed in float64: floating inputs cast (copies: the caller's inputs
    are untouched), and every floating dtype the graph names promoted. A graph that cannot be
    promoted (`CannotPromote`) has only its inputs cast."""
    def cast() -> list[Any]:   # fresh copies for each run: the graph may update its inputs in place
        return [a.detach().double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        try:
            out = _Float64(gm).run(*cast())
        except CannotPromote:
            out = gm(*cast())
    return list(out) if isinstance(out, (list, tuple)) else [out]
