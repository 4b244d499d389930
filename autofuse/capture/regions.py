"""A graph with symbolic sizes run as regions of static sizes, each compiled once, with the ops whose
sizes are symbolic run between them as ATen ops.

Note: kernels are generated for one size each, so a graph Dynamo traced with symbolic sizes is
otherwise compiled anew for every size it meets. In a decoder's step over a growing key/value
cache only the cache has a symbolic length: its concatenation with the new keys and values and the
attention over it. Everything else (embeddings, projections, norms, the MLP, the head) has the
sizes of the new tokens, which Dynamo guards. Those ops form regions whose inputs all have static
sizes; each region is a static graph compiled once (its tuning-DB lookup and autotune included) and
serves every cache length, and the size-dependent ops run between them with ATen, at whatever size
they meet. Inductor instead generates kernels over symbolic sizes; those kernels are not built.

A node is static when its value and every input are tensors of static sizes (or plain constants);
a node whose value Dynamo did not record, that yields a symbolic integer, or that updates a tensor
in place is size-dependent. Levels keep the split acyclic: a static node sits at the highest level
of its inputs, one level above a size-dependent input; a size-dependent node at the highest level
of its inputs, run after that level's region. A region of views alone is not worth a compiled
program and runs with ATen too. The one update a split graph may hold is the functional graph's
epilogue: `copy_` of a final value into an input (a static cache written at a symbolic position).
It joins the region that computes the value when every other reader of the input runs no later
than that region (the region then writes the input itself, a scatter where only a slot changed);
otherwise it runs with ATen after everything else.

A step Dynamo made symbolic in its batch as well has no static region: the batch is in every op.
Such a graph is split with the batch (some of its input symbols) held fixed: sizes of fixed
symbols alone count as static, and each value of them gets its own split program
(`split_by_symbols`, `RegionsBySize`).
"""
from __future__ import annotations

import contextlib
import itertools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_symbols

from ..runtime.wrapper import direct_callable
from .graph_edit import upstream

# the share of the graph's compute ops that must sit in static regions for the split to pay: below
# it (a symbolic batch size makes nearly every op size-dependent) compiling per size does better
MIN_STATIC_SHARE = 0.5
# at most this many input symbols are considered for holding some fixed per program (2^n splits tried)
MAX_SYMBOLS = 5


def _fixed_int(d: Any, fixed: frozenset) -> bool:
    """An int, or a symbolic int of fixed symbols alone (`fixed`: symbols one program holds constant)."""
    return not isinstance(d, torch.SymInt) or (bool(fixed) and d.node.expr.free_symbols <= fixed)


def _static_value(v: Any, fixed: frozenset = frozenset()) -> bool:
    if isinstance(v, torch.Tensor):
        return all(_fixed_int(d, fixed) for d in (*v.shape, *v.stride(), v.storage_offset()))
    if isinstance(v, (tuple, list)):
        return len(v) > 0 and all(isinstance(x, torch.Tensor) and _static_value(x, fixed) for x in v)
    if isinstance(v, torch.SymInt) and fixed:   # a size computed from fixed symbols (`batch * 16`)
        return _fixed_int(v, fixed)
    return False


def _mutates(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def _is_view(node: torch.fx.Node) -> bool:
    """An op that computes nothing: a getitem, or an op returning an alias of an input (a view)."""
    if node.target is operator.getitem:
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def is_static(node: torch.fx.Node, fixed: frozenset = frozenset()) -> bool:
    """The node's value and every input have static sizes (or sizes of `fixed` symbols alone), and it
    updates nothing in place."""
    if node.op == "get_attr":
        return _static_value(node.meta.get("val"))
    if node.op != "call_function" or _mutates(node) or not _static_value(node.meta.get("val"), fixed):
        return False
    return all(_static_value(i.meta.get("val"), fixed) for i in node.all_input_nodes)


@dataclass(frozen=True)
class Split:
    """Which level each node belongs to: static nodes form one region per level."""

    static: dict[torch.fx.Node, int]     # static node -> its region's level
    dynamic: dict[torch.fx.Node, int]    # size-dependent op -> the level it runs after
    static_share: float                  # compute ops in regions / all compute ops
    free: frozenset[torch.fx.Node] = frozenset()   # views made where they are read (`_input_views`)


def _epilogue_copy(node: torch.fx.Node) -> bool:
    """A copy of a final value into a graph input whose result nothing but the output reads."""
    return (node.op == "call_function" and node.target is torch.ops.aten.copy_.default
            and node.args[0].op == "placeholder" and all(u.op == "output" for u in node.users))


def split_levels(graph: torch.fx.Graph, fixed: frozenset = frozenset()) -> Split:
    """Each op's level and side (see the module's note), whether or not the split pays; sizes of
    `fixed` symbols alone count as static (`split_by_symbols`)."""
    static: dict[torch.fx.Node, int] = {}
    dynamic: dict[torch.fx.Node, int] = {}
    level: dict[torch.fx.Node, int] = {}
    for n in graph.nodes:
        if n.op in ("placeholder", "output"):
            level[n] = 0
            continue
        # a tuple (an op of several outputs) enters a region only through the getitems beside it
        if is_static(n, fixed) and all(isinstance(i.meta.get("val"), torch.Tensor) or i in static
                                       or (fixed and i.op == "placeholder") for i in n.all_input_nodes):
            level[n] = max((level[i] + (i in dynamic) for i in n.all_input_nodes), default=0)
            static[n] = level[n]
        else:
            level[n] = max((level[i] for i in n.all_input_nodes), default=0)
            dynamic[n] = level[n]
    # a level whose static nodes compute nothing (views, getitems) runs with ATen
    computing = {lv for n, lv in static.items() if not _is_view(n)}
    for n in [n for n, lv in static.items() if lv not in computing]:
        dynamic[n] = static.pop(n)
    last = max(level.values(), default=0) + 1
    for n in [n for n in dynamic if _epilogue_copy(n)]:
        target, value = n.args[0], n.args[1]
        lv = static.get(value) if isinstance(value, torch.fx.Node) else None
        readers = [r for r in target.users if r is not n]
        if lv is not None and _static_value(target.meta.get("val"), fixed) and all(
                static.get(r, -1) <= lv if r in static else dynamic.get(r, last) < lv for r in readers):
            static[n] = lv
            del dynamic[n]
        else:
            dynamic[n] = last
    n_static = sum(1 for n in static if not _is_view(n))
    n_dynamic = sum(1 for n in dynamic if n.op == "call_function" and not _is_view(n))
    share = n_static / (n_static + n_dynamic) if n_static + n_dynamic else 0.0
    free = _input_views(graph, static) | _fixed_sizes(graph, static)
    return Split({n: lv for n, lv in static.items() if n not in free}, dynamic, share, free)


def _fixed_sizes(graph: torch.fx.Graph, static: dict[torch.fx.Node, int]) -> frozenset[torch.fx.Node]:
    """Sizes computed from fixed symbols alone (`batch * 16`, static under a split with fixed
    symbols), made where they are read like input views: a region returns tensors only."""
    out: set[torch.fx.Node] = set()
    for n in graph.nodes:
        if (n in static and isinstance(n.meta.get("val"), torch.SymInt)
                and all(i.op == "placeholder" or i in out for i in n.all_input_nodes)):
            out.add(n)
    return frozenset(out)


def _input_views(graph: torch.fx.Graph, static: dict[torch.fx.Node, int]) -> frozenset[torch.fx.Node]:
    """Static views made by every region (or ATen op) that reads them, not returned by the region
    of their level: a weight's transpose for its product (else the first region returns one view per
    weight on every call, each an input of a later region whose strides it checks), and a value's
    view that only regions read (RoPE's cos and sin, unsqueezed once per layer: the value is passed
    once). A view of a computed value that a size-dependent op reads stays a region output (what
    `_read_by_cat_only` lays out), and so do views of an input that an epilogue copy updates."""
    updated = {n.args[0] for n in graph.nodes if _epilogue_copy(n)}
    of_updated: set[torch.fx.Node] = set()
    for n in graph.nodes:
        if _is_view(n) and any(i in updated or i in of_updated for i in n.all_input_nodes):
            of_updated.add(n)

    def candidate(n: torch.fx.Node) -> bool:
        return (n in static and n not in of_updated and n.target is not operator.getitem and _is_view(n)
                and not _mutates(n) and bool(n.all_input_nodes))
    free: set[torch.fx.Node] = set()
    for n in graph.nodes:   # views of inputs, chains of them included
        if candidate(n) and all(i.op in ("placeholder", "get_attr") or i in free for i in n.all_input_nodes):
            free.add(n)
    for n in reversed(graph.nodes):   # readers first: a view read only by free views and regions
        if candidate(n) and all(u in free or (u in static and u.op != "output") for u in n.users):
            free.add(n)
    return frozenset(free)


def _readers(node: torch.fx.Node, free: frozenset[torch.fx.Node]) -> list[torch.fx.Node]:
    """The nodes that read node's value, through free views included (the views themselves not)."""
    out, todo = [], list(node.users)
    while todo:
        u = todo.pop()
        if u in free:
            todo.extend(u.users)
        else:
            out.append(u)
    return out


def worth_splitting(gm: torch.fx.GraphModule, fixed: frozenset = frozenset()) -> Split | None:
    """The split of a graph with symbolic sizes when its static regions hold most of the compute
    (and it updates nothing in place but its epilogue's copies: a region reordered past an ATen op
    could see the update); None otherwise."""
    if any(n.op == "call_function" and _mutates(n) and not _epilogue_copy(n) for n in gm.graph.nodes):
        return None
    split = split_levels(gm.graph, fixed)
    if not split.static or split.static_share < MIN_STATIC_SHARE:
        return None
    return split


def symbol_sources(gm: torch.fx.GraphModule) -> dict[Any, tuple[int, int | None]]:
    """Where each symbol of the graph's inputs is read at a call: (input, dim) of a tensor input
    whose size it is, or (input, None) for an input that is the symbolic int itself."""
    out: dict[Any, tuple[int, int | None]] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for k, n in enumerate(placeholders):
        v = n.meta.get("val")
        dims = [(None, v)] if isinstance(v, torch.SymInt) else (
            list(enumerate(v.shape)) if isinstance(v, torch.Tensor) else [])
        for d, size in dims:
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                out.setdefault(size.node.expr, (k, d))
    return out


def split_by_symbols(gm: torch.fx.GraphModule) -> tuple[frozenset, Split] | None:
    """A split that holds some symbols constant per program (`fixed`), when no split pays with every
    symbol varying: a decoding step Dynamo made symbolic in its batch too (a new batch size, or greedy
    then beam search) keeps the batch fixed in each program and lets the cache's length vary. The
    fewest fixed symbols whose split pays win (then the larger static share); every symbol fixed is
    the per-size path, not a split. None when no such split pays or a symbol cannot be read from
    the inputs."""
    sources = symbol_sources(gm)
    symbols = sorted(sources, key=str)
    free = set().union(*(free_symbols(n.meta.get("val")) for n in gm.graph.nodes))
    if not symbols or not free <= set(symbols) or len(symbols) > MAX_SYMBOLS:
        return None
    best: tuple[frozenset, Split] | None = None
    for size in range(1, len(symbols)):
        for fixed in itertools.combinations(symbols, size):
            split = worth_splitting(gm, frozenset(fixed))
            if split is not None and (best is None or split.static_share > best[1].static_share):
                best = (frozenset(fixed), split)
        if best is not None:
            return best
    return None


class RegionsBySize:
    """A split with fixed symbols: one RegionProgram per value of those symbols, each built at the
    first call that meets its values (its regions compile at their first call), at most `most`."""

    def __init__(self, gm: torch.fx.GraphModule, fixed: frozenset, split: Split,
                 make_region: Callable[[torch.fx.GraphModule, tuple[int, ...]], Any], most: int) -> None:
        sources = symbol_sources(gm)
        self.reads = tuple(sources[s] for s in sorted(fixed, key=str))
        self.gm, self.split, self.make_region, self.most = gm, split, make_region, most
        # built now: a split whose regions cannot be formed (ValueError) is refused at compile time
        self._first: RegionProgram | None = RegionProgram(gm, split, make_region)
        self.regions_each, self.ops = len(self._first.regions), self._first.ops
        self.programs: dict[tuple[int, ...], RegionProgram] = {}

    def key(self, args: Sequence[Any]) -> tuple[int, ...]:
        return tuple([int(args[k]) if d is None else args[k].shape[d] for k, d in self.reads])

    def program(self, args: Sequence[Any]) -> "RegionProgram | None":
        """The program for these inputs' fixed symbols; None past `most` programs."""
        key = self.key(args)
        prog = self.programs.get(key)
        if prog is None:
            if len(self.programs) >= self.most:
                return None
            prog, self._first = self._first or RegionProgram(self.gm, self.split, self.make_region), None
            self.programs[key] = prog
        return prog

    @property
    def regions(self) -> list[Any]:
        return [r for p in self.programs.values() for r in p.regions]


class RegionProgram:
    """Runs a graph split into static regions (each a compiled graph, compiled at its first call)
    and the size-dependent ATen ops between them, in one straight-line FX module."""

    def __init__(self, gm: torch.fx.GraphModule, split: Split,
                 make_region: Callable[[torch.fx.GraphModule, tuple[int, ...]], Any]) -> None:
        self.regions: list[Any] = []
        graph, env = torch.fx.Graph(), {}
        nodes = list(gm.graph.nodes)
        for n in nodes:
            if n.op == "placeholder":
                env[n] = graph.node_copy(n, env.__getitem__)
        self.free = split.free
        regions: dict[int, list[torch.fx.Node]] = {}
        aten: dict[int, list[torch.fx.Node]] = {}
        for n in nodes:   # in graph order within each level
            if n in split.static:
                regions.setdefault(split.static[n], []).append(n)
            elif n in split.dynamic:
                aten.setdefault(split.dynamic[n], []).append(n)
        order = {n: k for k, n in enumerate(nodes)}
        softmaxes = _softmaxes(split.dynamic)
        folded = {m for chain in softmaxes.values() for m in chain[:-1]}
        for lv in sorted(regions.keys() | aten.keys()):
            if lv in regions:
                members = regions[lv]
                views = _views_read(members, split.free)
                self._emit_region(gm, graph, env, sorted([*views, *members], key=order.__getitem__), make_region)
            for n in aten.get(lv, ()):
                if n in folded:
                    continue
                if n in softmaxes:   # ATen's softmax kernel, one call for the five ops
                    first, amax = softmaxes[n][0], softmaxes[n][-5]
                    self._emit_views(graph, env, first, order)
                    # a 16-bit input converted to f32 first: the softmax's dtype
                    kwargs = {"dtype": torch.float32} if first is not amax else {}
                    env[n] = graph.call_function(torch.softmax, (env[first.args[0]], amax.args[1][0]), kwargs)
                    env[n].meta.update(n.meta)
                    continue
                if _dead_copy(n):   # a copy of a value nothing else reads (eval-mode dropout's clone)
                    env[n] = env[n.args[0]]
                    continue
                self._emit_views(graph, env, n, order)
                env[n] = _bound(graph.node_copy(n, env.__getitem__))
        out = next(n for n in nodes if n.op == "output")
        self._emit_views(graph, env, out, order)
        graph.node_copy(out, env.__getitem__)
        self.gm = torch.fx.GraphModule(gm, graph)
        self.ops = sum(1 for n in split.dynamic if n.op == "call_function" and not _is_view(n) and n not in folded
                       and not _dead_copy(n))

    def _emit_region(self, gm: torch.fx.GraphModule, graph: torch.fx.Graph, env: dict,
                     members: list[torch.fx.Node],
                     make_region: Callable[[torch.fx.GraphModule, tuple[int, ...]], Any]) -> None:
        inside = set(members)
        inputs = list(dict.fromkeys(i for n in members for i in n.all_input_nodes if i not in inside))
        outputs = [n for n in members if n not in self.free and any(u not in inside for u in _readers(n, self.free))]
        if any(not isinstance(n.meta.get("val"), torch.Tensor) for n in outputs):
            raise ValueError("a region's output is not one tensor")
        sub, sub_env = torch.fx.Graph(), {}
        for i in inputs:
            p = sub.placeholder(i.name)
            p.meta.update(i.meta)
            sub_env[i] = p
        for n in members:
            sub_env[n] = sub.node_copy(n, sub_env.__getitem__)
        sub.output(tuple(_dense(sub, sub_env[n]) if _read_by_cat_only(n, inside) else sub_env[n] for n in outputs))
        # Dynamo guards the graph's own inputs; the others come from ATen ops or earlier regions
        unguarded = tuple(k for k, i in enumerate(inputs) if i.op != "placeholder")
        region = make_region(torch.fx.GraphModule(gm, sub), unguarded)
        self.regions.append(region)

        def run(*args: Any) -> Any:
            return region(list(args))
        run.__name__ = f"region_{len(self.regions) - 1}"
        run.__module__ = __name__
        call = graph.call_function(run, tuple(env[i] for i in inputs))
        for k, n in enumerate(outputs):
            env[n] = graph.call_function(operator.getitem, (call, k))
            env[n].meta.update(n.meta)

    def _emit_views(self, graph: torch.fx.Graph, env: dict, node: torch.fx.Node, order: dict) -> None:
        """The input views an ATen op (or the output) reads, made in the ATen graph before it."""
        for v in sorted(_views_read([node], self.free), key=order.__getitem__):
            if v not in env:
                env[v] = _bound(graph.node_copy(v, env.__getitem__))

    def __call__(self, args: Sequence[Any], steal: bool = False) -> list:
        out = self.gm(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _bound(node: torch.fx.Node) -> torch.fx.Node:
    """node calling the `torch.*` binding of its ATen op where that binding can only resolve to this
    overload (`runtime.wrapper.direct_callable`): the step runs these ops on every call, and the
    binding skips `OpOverload.__call__` (1.3 against 2.8 µs for a `cat`, 1.4 against 3.4 for a
    `clone` on a CPU host)."""
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        b = direct_callable(t)
        if getattr(torch, t.overloadpacket.__name__, None) is b:   # FX writes it as `torch.<name>`
            node.target = b
    return node


def _softmaxes(dynamic: dict[torch.fx.Node, int]) -> dict[torch.fx.Node, tuple[torch.fx.Node, ...]]:
    """Softmaxes the decomposition wrote out among the size-dependent ops (eager attention's, over a
    growing cache): each final division -> ([a 16-bit input's f32 conversion,] amax, sub, exp, sum,
    div), when the five are size-dependent, read nothing but x and each other, and nothing else
    reads the four before the division. Run as ATen ops they are five calls and five kernels where ATen's softmax is one of
    each (the same max-subtracted sum)."""
    aten = torch.ops.aten
    out: dict[torch.fx.Node, tuple[torch.fx.Node, ...]] = {}

    def only(node: torch.fx.Node, *readers: torch.fx.Node) -> bool:
        return set(node.users) == set(readers)
    for div in dynamic:
        if div.target is not aten.div.Tensor or not all(isinstance(a, torch.fx.Node) for a in div.args):
            continue
        exp, total = div.args
        if exp.target is not aten.exp.default or total.target is not aten.sum.dim_IntList:
            continue
        sub = exp.args[0]
        if (not isinstance(sub, torch.fx.Node) or sub.target is not aten.sub.Tensor
                or not isinstance(sub.args[1], torch.fx.Node)):
            continue
        x, amax = sub.args
        if amax.target is not aten.amax.default or amax.args[0] is not x:
            continue
        dims, sum_dims = list(amax.args[1]), list(total.args[1])
        xv, dv = x.meta.get("val"), div.meta.get("val")
        if (len(dims) != 1 or sum_dims != dims or total.args[0] is not exp or len(total.args) < 3
                or total.args[2] is not True or len(amax.args) < 3 or amax.args[2] is not True or total.kwargs
                or not isinstance(xv, torch.Tensor) or not isinstance(dv, torch.Tensor)
                or not xv.dtype.is_floating_point or dv.dtype != xv.dtype):
            continue
        chain = (amax, sub, exp, total, div)
        if not (all(n in dynamic for n in chain) and only(amax, sub) and only(sub, exp)
                and only(exp, total, div) and only(total, div)):
            continue
        source = x.args[0] if x.op == "call_function" and x.args else None
        sv = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if (x.target is aten._to_copy.default and x in dynamic and only(x, amax, sub) and xv.dtype == torch.float32
                and isinstance(sv, torch.Tensor) and sv.dtype in (torch.float16, torch.bfloat16)
                and set(x.kwargs) <= {"dtype", "layout", "device"} and x.kwargs.get("layout", torch.strided) == torch.strided
                and x.kwargs.get("device", sv.device) == sv.device):
            chain = (x, *chain)   # softmax(x, dtype=float32) converts as it reads
        out[div] = chain
    return out


def _dead_copy(node: torch.fx.Node) -> bool:
    """A clone that keeps its input's layout, of a value computed in the graph (not a view, not an
    input) that nothing else reads: in a functional graph the value itself serves."""
    src = node.args[0] if node.target is torch.ops.aten.clone.default and node.args else None
    return (isinstance(src, torch.fx.Node) and src.op == "call_function" and not _is_view(src)
            and node.kwargs.get("memory_format", torch.preserve_format) == torch.preserve_format
            and isinstance(src.meta.get("val"), torch.Tensor) and list(src.users) == [node])


def _views_read(nodes: Sequence[torch.fx.Node], free: frozenset[torch.fx.Node]) -> set[torch.fx.Node]:
    """The input views (`free`) that nodes read, with the views those are made from."""
    return upstream((i for n in nodes for i in n.all_input_nodes), free)


def _read_by_cat_only(node: torch.fx.Node, inside: set[torch.fx.Node]) -> bool:
    """A region output laid out with gaps or permuted (new keys: a transposed slice of a fused QKV
    product) that only size-dependent concatenations read. ATen's CUDA `cat` copies with its
    strided kernel when any input is not contiguous (15.9 µs a call over a GPT-2 cache on an
    H200, where torch.compile's kernel takes 3.9), so the region stores such an output
    contiguous: one more small copy in a compiled program, and the whole cache copied by ATen's
    vectorized kernel at every step."""
    v = node.meta.get("val")
    outside = [u for u in node.users if u not in inside]
    return (isinstance(v, torch.Tensor) and not v.is_contiguous() and bool(outside)
            and all(u.target is torch.ops.aten.cat.default for u in outside))


def _dense(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node:
    """A contiguous copy of node in graph, its recorded value beside it."""
    v = node.meta["val"]
    c = graph.call_function(torch.ops.aten.clone.default, (node,), {"memory_format": torch.contiguous_format})
    with getattr(v, "fake_mode", None) or contextlib.nullcontext():   # Dynamo records fake values
        c.meta["val"] = v.clone(memory_format=torch.contiguous_format)
    return c


def describe(program: "RegionProgram | RegionsBySize") -> str:
    if isinstance(program, RegionsBySize):
        fixed = ", ".join(f"input {k} dim {d}" if d is not None else f"input {k}" for k, d in program.reads)
        return (f"{program.regions_each} regions of static sizes compiled once per value of the sizes held "
                f"fixed ({fixed}; at most {program.most} values), {program.ops} ops with symbolic sizes run with ATen")
    return (f"{len(program.regions)} regions of static sizes compiled once, "
            f"{program.ops} ops with symbolic sizes run with ATen")
