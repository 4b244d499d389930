"""Fold constant attention masks out of `scaled_dot_product_attention` calls in a Dynamo graph.

Note: transformers builds its attention masks with tensor code (arange, comparisons, expand),
so under Dynamo a model that passes no mask in eager hands sdpa a materialized one: an all-true
mask (encoders) or the causal lower triangle (decoders). With a mask, AOTAutograd decomposes
sdpa into the math path (f32 bmm, softmax) and flash attention is lost. This pass runs on the
graph Dynamo captured, before AOTAutograd traces it. For each sdpa call whose mask depends only
on constants and on the *metadata* of other values (sizes, dtypes, devices; never their data),
it evaluates the mask once and
  - drops it when it masks nothing (all true, or an additive mask of zeros);
  - replaces it by is_causal=True when it is the causal lower triangle and the query and key
    lengths are equal;
  - leaves it otherwise.

Why this is sound: with static shapes, every size the mask was computed from is a literal of the
graph or the metadata of an input, and Dynamo guards those sizes, dtypes and devices; a call with
other sizes is traced again, and folded again. Masks that read the data of an input, parameter,
buffer or attribute tensor stay, as do graphs with symbolic sizes, masks that require grad, and
sdpa with dropout. Anything unexpected (an op that raises, a mutation of a mask by non-constant
data) leaves the graph as it is: the pass never makes a program fail.
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..logs import logger

SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)
SDPA_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")

# methods and functions that read only the metadata of their first argument
META_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride", "get_device",
                          "is_floating_point", "is_complex", "is_contiguous", "new_ones", "new_zeros", "new_full",
                          "new_tensor"})
META_FUNCTIONS = (torch.ones_like, torch.zeros_like, torch.full_like, torch.numel)
META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda"})
# ops whose values are random or uninitialized: never evaluated at compile time
NONDETERMINISTIC = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
                              "bernoulli", "multinomial", "normal", "poisson", "dropout", "empty", "empty_like",
                              "empty_strided", "new_empty", "new_empty_strided", "uniform_", "normal_",
                              "random_", "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_"})
INPLACE_OPERATORS = frozenset({operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                               operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
                               operator.ixor, operator.ilshift, operator.irshift})

_log = logger("fusion")


@dataclass(frozen=True)
class MaskFolding:
    """What the pass did to one graph: masks dropped, masks turned into is_causal, masks kept."""

    dropped: int = 0
    causal: int = 0
    kept: int = 0

    @property
    def folded(self) -> int:
        return self.dropped + self.causal

    def describe(self) -> str:
        return (f"attention masks: {self.folded} of {self.folded + self.kept} folded "
                f"({self.dropped} dropped, {self.causal} made is_causal, {self.kept} kept)")


def fold_attention_masks(gm: torch.fx.GraphModule, example_inputs: Sequence[Any] = ()) -> MaskFolding:
    """Fold the constant attention masks of gm's sdpa calls in place (see the module note); the
    graph is left unchanged where anything is unexpected."""
    calls = [n for n in gm.graph.nodes if _is_sdpa(n) and isinstance(_sdpa_args(n).get("attn_mask"), torch.fx.Node)]
    if not calls:
        return MaskFolding()
    try:
        decisions = _decide(gm.graph, calls, example_inputs)
    except Exception:  # noqa: BLE001 - a mask that cannot be evaluated stays
        decisions = {}
    dead = _mask_subgraph(list(decisions))
    for node, causal in decisions.items():
        args = _sdpa_args(node)
        args["attn_mask"] = None
        if causal:
            args["is_causal"] = True
        node.args = tuple(args.pop(p) for p in SDPA_PARAMS[:3])
        node.kwargs = args
    result = MaskFolding(dropped=sum(not c for c in decisions.values()), causal=sum(decisions.values()),
                         kept=len(calls) - len(decisions))
    if decisions:
        gm.graph.eliminate_dead_code(is_impure_node=lambda n: n not in dead or n.is_impure() or _mutates(n))
        gm.recompile()
    _log.info("%s", result.describe())
    return result


def _is_sdpa(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in SDPA_TARGETS


def _sdpa_args(node: torch.fx.Node) -> dict[str, Any]:
    """The call's arguments by name (positional ones named), defaults left out."""
    args = dict(zip(SDPA_PARAMS, node.args))
    args.update(node.kwargs)
    return args


def _decide(graph: torch.fx.Graph, calls: list[torch.fx.Node],
            example_inputs: Sequence[Any]) -> dict[torch.fx.Node, bool]:
    """For each foldable call: True (make it causal) or False (drop the mask)."""
    const = _constant_nodes(graph)
    candidates = [n for n in calls if _eligible(n, const)]
    if not candidates:
        return {}
    masks = {_sdpa_args(n)["attn_mask"] for n in candidates}
    needed = _ancestors(masks, const) | {n for n in const if _mutates(n)}
    needed |= _ancestors(needed, const)
    placeholders = {n: v for n, v in zip([p for p in graph.nodes if p.op == "placeholder"], example_inputs)}
    env: dict[torch.fx.Node, Any] = {}
    decisions: dict[torch.fx.Node, bool] = {}
    with unset_fake_temporarily():  # real values, even under an ambient fake mode
        for node in graph.nodes:
            if node in needed:
                env[node] = _evaluate(node, env, placeholders)
            elif node in candidates:
                causal = _classify(node, env[_sdpa_args(node)["attn_mask"]])
                if causal is not None:
                    decisions[node] = causal
    return decisions


def _eligible(node: torch.fx.Node, const: set[torch.fx.Node]) -> bool:
    """A constant mask, no dropout, not already causal, static sizes for q, k, v and the mask."""
    args = _sdpa_args(node)
    if args["attn_mask"] not in const or args.get("is_causal", False) is not False:
        return False
    if args.get("dropout_p", 0.0) not in (0, 0.0):  # a Node or a nonzero probability
        return False
    vals = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None
            for a in (args.get("query"), args.get("key"), args.get("value"), args["attn_mask"])]
    return all(isinstance(v, torch.Tensor) and _static(v) for v in vals)


def _static(v: torch.Tensor) -> bool:
    return not any(isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride()))


def _constant_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose values follow from constants and metadata alone. A constant value mutated by
    an op that reads non-constant data (a mixture of experts' `zeros_like(h).index_add_(...)`)
    is unknown at compile time, and so is every constant that may share its memory or was
    computed from it: its whole component of constant nodes (`_without_mutated`)."""
    const: set[torch.fx.Node] = set()
    mutated: list[torch.fx.Node] = []
    for node in graph.nodes:
        if node.op not in ("call_function", "call_method") or _op_name(node) in NONDETERMINISTIC:
            continue
        if not _allowed_function(node):
            continue
        meta_arg = _metadata_arg(node)
        inputs = [a for i, a in enumerate(_node_inputs(node)) if not (i == 0 and meta_arg is not None)]
        if meta_arg is not None and meta_arg not in const and not _has_static_meta(meta_arg):
            continue
        if all(a in const for a in inputs):
            const.add(node)
        elif _mutates(node):
            mutated.extend(a for a in _node_inputs(node) if a in const)
    return _without_mutated(const, mutated)


def _without_mutated(const: set[torch.fx.Node], mutated: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """const less the components of the mutated nodes, components over the edges between constant
    nodes other than metadata reads. A constant's inputs are constants or metadata reads (which
    make new tensors), so two constants can share memory only through such edges: a view of a
    mutated tensor, its base, and whatever either was computed into are in its component."""
    if not mutated:
        return const
    neighbours: dict[torch.fx.Node, set[torch.fx.Node]] = {n: set() for n in const}
    for n in const:
        meta_arg = _metadata_arg(n)
        for a in _node_inputs(n):
            if a in const and a is not meta_arg:
                neighbours[n].add(a)
                neighbours[a].add(n)
    gone: set[torch.fx.Node] = set()
    stack = list(mutated)
    while stack:
        n = stack.pop()
        if n not in gone:
            gone.add(n)
            stack.extend(neighbours[n] - gone)
    return const - gone


def _allowed_function(node: torch.fx.Node) -> bool:
    """torch.nn.functional ops other than pad are neural-network ops (some in place): never folded."""
    if node.op == "call_method":
        return True
    if node.target in SDPA_TARGETS:
        return False
    module = getattr(node.target, "__module__", "") or ""
    return not module.startswith("torch.nn.functional") or node.target is torch.nn.functional.pad


def _op_name(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


def _mutates(node: torch.fx.Node) -> bool:
    """An in-place op: a trailing-underscore method or function, an in-place operator, out= or inplace=True."""
    name = _op_name(node)
    if name.endswith("_") and not name.startswith("__"):
        return True
    if node.op == "call_function" and node.target in INPLACE_OPERATORS:
        return True
    return "out" in node.kwargs or node.kwargs.get("inplace", False) is True


def _metadata_arg(node: torch.fx.Node) -> torch.fx.Node | None:
    """The first argument when the op reads only its metadata (sizes, dtype, device)."""
    first = node.args[0] if node.args else None
    if not isinstance(first, torch.fx.Node):
        return None
    if node.op == "call_method" and node.target in META_METHODS:
        return first
    if node.op == "call_function" and (node.target in META_FUNCTIONS or
                                       (node.target is builtins.getattr and len(node.args) == 2
                                        and node.args[1] in META_ATTRS)):
        return first
    return None


def _has_static_meta(node: torch.fx.Node) -> bool:
    v = node.meta.get("example_value")
    return isinstance(v, torch.Tensor) and _static(v)


def _node_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The nodes among the op's arguments, in order (the first positional one first)."""
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg((node.args, node.kwargs), found.append)
    return found


def _ancestors(roots: set[torch.fx.Node], const: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """The constant nodes the roots are computed from, the roots included."""
    seen: set[torch.fx.Node] = set()
    stack = [r for r in roots if r in const]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        meta_arg = _metadata_arg(n)
        stack.extend(a for a in _node_inputs(n) if a in const and a is not meta_arg)
        if meta_arg is not None and meta_arg in const:
            stack.append(meta_arg)
    return seen


def _mask_subgraph(calls: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """Every node the calls' masks are computed from (the candidates for dead-code removal)."""
    seen: set[torch.fx.Node] = set()
    stack = [_sdpa_args(n)["attn_mask"] for n in calls]
    while stack:
        n = stack.pop()
        if n in seen or n.op in ("placeholder", "get_attr"):
            continue
        seen.add(n)
        stack.extend(_node_inputs(n))
    return seen


def _evaluate(node: torch.fx.Node, env: dict[torch.fx.Node, Any], placeholders: dict[torch.fx.Node, Any]) -> Any:
    """Run one constant node on real values; a metadata-only argument gets an uninitialized stand-in."""
    meta_arg = _metadata_arg(node)

    def value(a: torch.fx.Node) -> Any:
        if a in env:
            return env[a]
        if a is meta_arg:
            return _standin(a, placeholders.get(a))
        raise ValueError(f"{a.name} is not a constant")

    args = torch.fx.node.map_arg(node.args, value)
    kwargs = torch.fx.node.map_arg(node.kwargs, value)
    if node.op == "call_method":
        self_obj, *rest = args
        return getattr(self_obj, node.target)(*rest, **kwargs)
    return node.target(*args, **kwargs)


def _standin(node: torch.fx.Node, example: Any) -> torch.Tensor:
    """A tensor with the node's sizes, strides, dtype and device (its data is never read)."""
    v = example if isinstance(example, torch.Tensor) else node.meta.get("example_value")
    if not isinstance(v, torch.Tensor) or not _static(v):
        raise ValueError(f"no static metadata for {node.name}")
    return torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device=v.device)


def _classify(node: torch.fx.Node, mask: Any) -> bool | None:
    """False: the mask masks nothing; True: it is the causal triangle (equal lengths); None: keep."""
    if not isinstance(mask, torch.Tensor) or mask.requires_grad:
        return None
    args = _sdpa_args(node)
    q, k = args["query"].meta["example_value"], args["key"].meta["example_value"]
    if q.dim() < 2 or k.dim() < 2 or mask.device != q.device or mask.dtype not in (torch.bool, q.dtype):
        return None  # a mask sdpa rejects is left for sdpa to reject
    scores = (*q.shape[:-1], k.shape[-2])
    try:
        if tuple(torch.broadcast_shapes(mask.shape, scores)) != tuple(scores):
            return None  # dropping it would change the output's shape
    except RuntimeError:
        return None
    length, kv_length = scores[-2], scores[-1]
    if mask.dtype == torch.bool:
        keep = mask
    elif mask.is_floating_point():
        keep = mask == 0
        blocked = (mask == -math.inf) | (mask == torch.finfo(mask.dtype).min)
        if not bool((keep | blocked).all()):
            return None
    else:
        return None
    if bool(keep.all()):
        return False
    if length == kv_length:
        tril = torch.ones(length, kv_length, dtype=torch.bool, device=mask.device).tril()
        if bool((keep == tril).all()):
            return True
    return None
