"""Constants a model computes on the host and moves to the GPU at every call, computed once.

Note: models build small tensors on the CPU in their forward and move them to the GPU:
Swin v2's shifted-window attention mask in transformers (`torch.arange(height)` without a
device, region ids, `masked_fill`, then `.to(device)`), position tables, index maps. In a graph
of GPU work those CPU ops would run at every call (as host kernels), and the move is a copy from
pageable memory that waits for the GPU to drain before it. In the functional ATen graph such a
value is computed from factory ops and lifted constants alone: no input, no random draw, no
in-place op. Sizes there are literals of a graph of static sizes (a symbolic size is read from
an input), so the value is the same at every call; it is evaluated once, at compile time, and
becomes a lifted constant of the graph (`constants.lift_constants`), already on the GPU.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..logs import logger
from .constants import _fetch
from .graph_edit import upstream, val

DEVICES = ("cuda",)     # where a value must be for its host computation to be folded
MAX_BYTES = 64 << 20    # a larger constant stays computed at every call rather than held in memory
# ops whose values are random or uninitialized: never evaluated at compile time
NONDETERMINISTIC = ("rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal", "poisson",
                    "dropout", "native_dropout", "empty", "empty_like", "empty_strided", "new_empty",
                    "new_empty_strided", "uniform", "exponential", "geometric", "cauchy", "log_normal", "seed",
                    "philox")
_log = logger("fusion")


def fold_host_constants(gm: torch.fx.GraphModule) -> int:
    """Replace each constant GPU value of gm computed from CPU tensors by a graph attribute holding
    it (in place); returns how many were folded. The graph is left as it is where anything fails."""
    const = _constant_nodes(gm.graph)
    # a returned value is left computed: the caller owns it and may write to it
    roots = [n for n in gm.graph.nodes if n in const and any(u not in const for u in n.users)
             and all(u.op != "output" for u in n.users) and _host_made(n, const)]
    if not roots:
        return 0
    try:
        values = _evaluate(gm, roots, const)
    except Exception:  # noqa: BLE001 - a value that cannot be evaluated stays computed
        return 0
    for k, (node, value) in enumerate(values.items()):
        name = f"_host_constant{k}"
        while hasattr(gm, name):
            name += "_"
        setattr(gm, name, value)
        with gm.graph.inserting_before(node):   # a tensor attribute, as the trace makes constants
            attr = gm.graph.create_node("get_attr", name)
        attr.meta.update(node.meta)
        node.replace_all_uses_with(attr)
    if values:
        gm.graph.eliminate_dead_code()
        gm.recompile()
        _log.info("host constants: %d computed once on the GPU", len(values))
    return len(values)


def _constant_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes computed from lifted constants and literals alone, by deterministic pure ops."""
    const: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "get_attr":
            const.add(node)
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        name = node.target._opname.rstrip("_")
        if schema.is_mutable or any(name.startswith(r) or name.endswith(r) for r in NONDETERMINISTIC):
            continue
        if all(a in const for a in node.all_input_nodes):
            const.add(node)
    return const


def _host_made(node: torch.fx.Node, const: set[torch.fx.Node]) -> bool:
    """A GPU tensor (no gradient, at most MAX_BYTES) with a CPU tensor among the constants it is
    computed from."""
    v = val(node)
    if not isinstance(v, torch.Tensor) or v.device.type not in DEVICES or v.requires_grad:
        return False
    if v.numel() * v.element_size() > MAX_BYTES:
        return False
    return any(isinstance(val(a), torch.Tensor) and val(a).device.type == "cpu"
               for a in upstream(node.all_input_nodes, const))


def _evaluate(gm: torch.fx.GraphModule, roots: list[torch.fx.Node],
              const: set[torch.fx.Node]) -> dict[torch.fx.Node, torch.Tensor]:
    """The roots' values, run on real tensors (outside any ambient fake mode)."""
    needed = upstream(roots, const)
    env: dict[torch.fx.Node, Any] = {}
    with unset_fake_temporarily(), torch.no_grad():
        for node in gm.graph.nodes:
            if node not in needed:
                continue
            if node.op == "get_attr":
                env[node] = _fetch(gm, node.target)
            else:
                args = torch.fx.node.map_arg(node.args, env.__getitem__)
                kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
                env[node] = node.target(*args, **kwargs)
        out = {}
        for r in roots:
            v, meta = env[r], val(r)
            if (isinstance(v, torch.Tensor) and v.device.type == meta.device.type and v.dtype == meta.dtype
                    and tuple(v.shape) == tuple(meta.shape)):
                # in the layout the graph recorded (the lowering reads the constant by its strides)
                out[r] = torch.empty_strided(tuple(meta.shape), tuple(meta.stride()), dtype=v.dtype,
                                             device=v.device).copy_(v)
        return out
