"""Canonical structural hash of a captured ATen graph, and the device and version keys plans are
stored under (the tuning DB's key layout).

Note: nodes are numbered by position, so names, Python ids and the process do not matter; what
does — every op and overload, the argument structure, constants (floats exactly, via hex), input
shapes, strides and dtypes, the outputs, and the bodies of higher-order ops (`torch.cond`'s
branches, a flex attention's score function) — is all in the hashed text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx


def _canon(a: Any, index: dict[torch.fx.Node, int]) -> Any:
    if isinstance(a, torch.fx.Node):
        return f"%{index[a]}"
    if isinstance(a, (list, tuple)):
        return [type(a).__name__] + [_canon(x, index) for x in a]
    if isinstance(a, dict):
        return ["dict"] + [[k, _canon(v, index)] for k, v in sorted(a.items())]
    if isinstance(a, bool) or a is None:
        return repr(a)
    if isinstance(a, float):
        return f"f{a.hex()}"
    if isinstance(a, int):
        return f"i{a}"
    if isinstance(a, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(a)
    if isinstance(a, str):
        return f"s{a}"
    return f"{type(a).__name__}:{a!r}"


def _describe_input(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ["tensor", list(a.shape), list(a.stride()), str(a.dtype), a.device.type]
    if isinstance(a, torch.SymInt):
        return ["int", int(a)]
    return [type(a).__name__, repr(a)]


def _target(t: Any) -> str:
    if isinstance(t, torch._ops.OpOverload):
        return str(t)  # e.g. aten.add.Tensor: the overload, not just the op
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', getattr(t, '__name__', repr(t)))}"


def _user_kernel(n: torch.fx.Node) -> Any:
    """A node's kwargs; for a user Triton kernel's call, its source and constant arguments in place
    of its indices into torch's table of kernels (they count the kernels this process traced)."""
    if not (isinstance(n.target, torch._ops.HigherOrderOperator) and n.target.name().startswith("triton_kernel_wrapper")):
        return n.kwargs
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    kw = dict(n.kwargs)
    kernel = kernel_side_table.get_kernel(kw["kernel_idx"])
    src = getattr(kernel, "src", None) or getattr(getattr(kernel, "fn", None), "src", "") or ""
    kw["kernel_idx"] = hashlib.sha256(src.encode()).hexdigest()[:16]
    kw["constant_args_idx"] = kernel_side_table.get_constant_args(kw["constant_args_idx"])
    return kw


def graph_hash(gm: torch.fx.GraphModule, args: Sequence[Any]) -> str:
    index: dict[torch.fx.Node, int] = {}
    lines = []
    inputs = iter(args)
    for i, n in enumerate(gm.graph.nodes):
        index[n] = i
        if n.op == "placeholder":
            lines.append(["in", _describe_input(next(inputs, None))])
        elif n.op == "get_attr" and isinstance(sub := getattr(gm, n.target, None), torch.fx.GraphModule):
            lines.append(["body", graph_hash(sub, [])])   # a higher-order op's body: its ops, not its name
        elif n.op in ("call_function", "call_method", "call_module", "get_attr"):
            lines.append([n.op, _target(n.target), _canon(n.args, index), _canon(_user_kernel(n), index)])
        elif n.op == "output":
            lines.append(["out", _canon(n.args, index)])
    text = repr(lines)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Versions:
    torch: str
    triton: str
    plan_schema: int

    @staticmethod
    def current() -> "Versions":
        import triton

        from .plan import SCHEMA_VERSION
        return Versions(torch.__version__, triton.__version__, SCHEMA_VERSION)


def device_key(args: Sequence[Any]) -> str:
    """The device a graph's kernels run on: GPU name and compute capability, or the CPU interpreter."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "cuda":
            idx = a.device.index if a.device.index is not None else torch.cuda.current_device()
            major, minor = torch.cuda.get_device_capability(idx)
            return f"cuda:{torch.cuda.get_device_name(idx)}:sm{major}{minor}"
    return "cpu:triton-interpreter"
