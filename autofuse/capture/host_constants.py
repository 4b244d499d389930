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

The same holds for a small constant the model computes on the GPU through an op that needs a
kernel of its own (a reduction, a sort, a scan, a scatter): flex attention's block mask built in
the forward from its mask_mod (sums over blocks, four sorts, two index_puts) is six kernels at every
call, or none once folded. A constant made of pointwise ops and views alone stays computed: it
costs nothing in the kernel that reads it (index arithmetic), where a folded one would be a load.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..logs import logger
from .constants import _fetch
from .graph_edit import upstream, val

DEVICES = ("cuda",)     # where a value must be for its host computation to be folded
HOST = "cpu"            # the device of host-made values
MAX_BYTES = 64 << 20    # a larger constant stays computed at every call rather than held in memory
MAX_DEVICE_BYTES = 1 << 20  # the same for a constant made on the GPU (recomputing it there is cheap)
# ops that run as kernels of their own rather than fused as index arithmetic (besides reductions)
STANDALONE = ("sort", "argsort", "topk", "kthvalue", "median", "mode", "cumsum", "cumprod", "cummax", "cummin",
              "logcumsumexp", "index_put", "index_add", "index_reduce", "scatter", "bincount", "histc",
              "searchsorted", "bucketize", "unique")
# ops whose values are random or uninitialized: never evaluated at compile time
NONDETERMINISTIC = ("rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal", "poisson",
                    "dropout", "native_dropout", "empty", "empty_like", "empty_strided", "new_empty",
                    "new_empty_strided", "uniform", "exponential", "geometric", "cauchy", "log_normal", "seed",
                    "philox")
_log = logger("fusion")


def fold_host_constants(gm: torch.fx.GraphModule) -> int:
    """Replace each constant GPU value of gm computed from CPU tensors, or on the GPU by a kernel of
    its own, by a graph attribute holding it (in place); returns how many were folded. The graph is
    left as it is where anything fails."""
    const = _constant_nodes(gm.graph)
    # a returned value is left computed: the caller owns it and may write to it
    roots = [n for n in gm.graph.nodes if n in const and any(u not in const for u in n.users)
             and all(u.op != "output" for u in n.users) and _worth_folding(n, const)]
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
        if node.op == "call_function" and node.target is operator.getitem:   # one value of sort's pair
            if node.args[0] in const:
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


def _worth_folding(node: torch.fx.Node, const: set[torch.fx.Node]) -> bool:
    """A GPU tensor (no gradient) with a CPU tensor among the constants it is computed from (at
    most MAX_BYTES), or computed by an op that needs a kernel of its own (at most MAX_DEVICE_BYTES)."""
    v = val(node)
    if not isinstance(v, torch.Tensor) or v.device.type not in DEVICES or v.requires_grad:
        return False
    nbytes = v.numel() * v.element_size()
    if nbytes > MAX_BYTES:
        return False
    made_from = upstream(node.all_input_nodes, const) | {node}
    if any(isinstance(val(a), torch.Tensor) and val(a).device.type == HOST for a in made_from):
        return True
    return nbytes <= MAX_DEVICE_BYTES and any(_standalone(a) for a in made_from)


def _standalone(node: torch.fx.Node) -> bool:
    """An op run as a kernel of its own (a reduction, a sort, a scan, a scatter), not index math."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    return (torch.Tag.reduction in node.target.tags
            or node.target._opname.rstrip("_").startswith(STANDALONE))


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
