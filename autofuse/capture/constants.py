"""Lifted constant tensors: `get_attr` nodes of a functional graph become trailing graph inputs.

Note: AOTAutograd leaves tensors created while tracing (`torch.tensor(...)` inside a forward,
a model's cached masks) as attributes read by `get_attr`. Turning each into a placeholder after
the real ones lets the rest of the compiler (lowering, hashing, plans, the eager fallback) see
one kind of input; the graph's caller appends the constants to every call's arguments.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.fx


def _fetch(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def lift_constants(gm: torch.fx.GraphModule) -> tuple[torch.Tensor, ...]:
    """Replace every tensor `get_attr` of gm by a new last placeholder (in place); returns the
    constants in placeholder order. Non-tensor attributes (submodules) are left alone."""
    getattrs = [n for n in gm.graph.nodes if n.op == "get_attr" and isinstance(_fetch(gm, n.target), torch.Tensor)]
    if not getattrs:
        return ()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    anchor = placeholders[-1] if placeholders else None
    constants: list[torch.Tensor] = []
    lifted: dict[str, torch.fx.Node] = {}   # a target read by several nodes (tied weights) is one input
    for n in getattrs:
        if n.target in lifted:
            n.replace_all_uses_with(lifted[n.target])
            gm.graph.erase_node(n)
            continue
        value = _fetch(gm, n.target)  # no op on it here: the backend runs under a fake mode
        ctx = gm.graph.inserting_after(anchor) if anchor is not None else gm.graph.inserting_before(
            next(iter(gm.graph.nodes)))
        with ctx:
            ph = gm.graph.placeholder(f"const_{n.target.replace('.', '_')}")
        ph.meta.update(n.meta)
        ph.meta["val"] = value
        n.replace_all_uses_with(ph)
        gm.graph.erase_node(n)
        lifted[n.target] = anchor = ph
        constants.append(value)
    gm.recompile()
    return tuple(constants)


def place_constants(constants: Sequence[torch.Tensor], args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """0-dim CPU constants move to the graph's CUDA device (eager treats them as scalars; a kernel
    cannot read host memory); every other constant stays where the module put it."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "cuda"), None)
    if device is None:
        return tuple(constants)
    return tuple(c.to(device) if c.dim() == 0 and c.device.type == "cpu" else c for c in constants)
