"""Fusion groups, legality (can_fuse answers None or a reason) and Inductor's greedy fuse_nodes.

Note: fuse_nodes follows the seed document: candidate pairs only between groups that share a
buffer, at most `pairwise_attempts` partners ahead per group, filtered by legality and the
heuristics' profitability check, sorted by score, merged greedily with a re-check (cycles
included) on the groups as they stand, repeated for up to `max_rounds` rounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import sympy

from ..codegen.config import next_pow2
from ..codegen.tiling import access_strides
from ..ir.index import FloorDiv, ModIndex
from ..logs import logger
from .loops import Placement, XOrder, placement, same_point
from .nodes import MemoryDep, SchedulerNode, itemsize
from .scheduler import SchedulerGraph

if TYPE_CHECKING:  # the fusion loop is handed a Heuristics value; it never imports one
    from .heuristics import Heuristics

_fusion_log = logger("fusion")


@dataclass(eq=False)
class FusionGroup:
    """A set of scheduler nodes that becomes one kernel (or one ATen call)."""

    nodes: list[SchedulerNode]
    numel: int
    rnumel: int
    is_reduction: bool

    @property
    def is_extern(self) -> bool:
        return self.nodes[0].kind == "extern"

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n.name for n in self.nodes)

    @property
    def min_order(self) -> int:
        return min(n.order for n in self.nodes)

    @property
    def max_order(self) -> int:
        return max(n.order for n in self.nodes)

    @property
    def ancestors(self) -> frozenset[str]:
        out: set[str] = set()
        for n in self.nodes:
            out |= n.ancestors
        return frozenset(out - self.names)

    @property
    def accessed(self) -> set[str]:
        out: set[str] = set()
        for n in self.nodes:
            out |= set(n.read_names) | set(n.outputs)
        return out

    @property
    def device(self):
        n = self.nodes[0]
        return n.buffer.device if n.buffer is not None else None

    def placements(self) -> list[tuple[SchedulerNode, Placement]]:
        return [(n, placement(n, self.numel, self.rnumel, self.is_reduction)) for n in self.nodes]

    def describe(self) -> str:
        return "+".join(n.name for n in self.nodes)


def singleton(node: SchedulerNode) -> FusionGroup:
    if node.kind == "extern":
        return FusionGroup([node], 0, 1, False)
    if node.kind == "scan":
        return FusionGroup([node], node.numel // node.sizes[-1], node.sizes[-1], True)
    return FusionGroup([node], node.numel, node.rnumel, node.kind == "reduction")


def is_outer_reduction(g: FusionGroup, persistent_max: int = 1024) -> bool:
    """Does the group's first reduction (or scan) read memory with a stride along its innermost r
    variable? Then its lanes run along x (an outer reduction's config). Column partials in a row
    kernel do not decide: the kernel's rows do."""
    rows = _row_nodes(g)
    for n in rows:
        if n.kind == "scan":  # its r variable is its last
            inner_r = n.vars[-1]
        elif n.kind != "reduction" or not n.rvars:
            continue
        else:
            inner_r = n.rvars[-1]
        along_r = [dep for dep in n.reads if not dep.is_indirect and dep.index.has(inner_r)]
        # a read that moves with x too decides; one of r alone (a broadcast [R, 1] vector) is
        # small, and every lane reads the same address of it whichever way the lanes run
        xvars, tiles = _tile_reads(n, inner_r)
        if not tiles:
            return bool(along_r) and all(dep.index.coeff(inner_r) != 1 for dep in along_r)
        strided = [_strided_along_r(dep, inner_r, xvars) for dep in tiles]
        if all(strided):
            return True
        # mixed: in a looped row, one tile read strided along r is enough (lanes along r would
        # read it one element per 32-byte sector, while lanes along x read an r-contiguous
        # operand in 16-element runs, whole sectors still); a row that fits a persistent kernel
        # (`persistent_max`, Heuristics.persistent_rnumel_max) keeps its lanes along r, where it
        # is read once from registers (a bf16 softmax of 1000-element rows mixing the two ran at
        # 0.87x torch.compile's time so, 2.07x with lanes along x), unless the strided reads
        # outweigh the others STRIDED_DOMINATES times (a column sum of a row softmax's values
        # reads the rows' max and sum, one value per row, beside the whole matrix down columns)
        if not any(strided):
            return False
        if next_pow2(max(g.rnumel, 1)) > persistent_max:
            return True
        weight = {s: sum(dep.footprint() for dep, t in zip(tiles, strided) if t is s) for s in (True, False)}
        return weight[True] >= STRIDED_DOMINATES * weight[False]
    return False


def reduction_hint(g: FusionGroup, persistent_max: int = 1024) -> str:
    """How the group's first reduction reads its rows, as Inductor hints a reduction: "mixed" where
    its tile reads include both r-contiguous and r-strided ones, else "outer" where
    `is_outer_reduction` runs its lanes along x, else "inner"."""
    for n in _row_nodes(g):
        if n.kind != "reduction" or not n.rvars:
            continue
        inner_r = n.rvars[-1]
        xvars, tiles = _tile_reads(n, inner_r)
        strided = {_strided_along_r(dep, inner_r, xvars) for dep in tiles}
        if strided == {True, False}:
            return "mixed"
        break
    return "outer" if is_outer_reduction(g, persistent_max) else "inner"


def lane_order(g: FusionGroup, persistent_max: int = 1024) -> XOrder | None:
    """The x order an outer reduction's lanes take (`XOrder`), None to keep the logical one: the x
    digit that its largest tile read steps through memory by the least goes innermost, where that
    step is below the last digit's. Lanes along x then read neighbouring addresses, as a column
    sum's do."""
    if not g.is_reduction or g.numel == 0 or not is_outer_reduction(g, persistent_max):
        return None   # (an empty kernel never runs: its lanes have no order to take)
    red = next((n for n in _row_nodes(g) if n.kind == "reduction" and n.rvars), None)
    if red is None:
        return None
    dims = [k for k, s in enumerate(red.sizes) if s != 1]
    xvars = [red.vars[k] for k in dims]
    tiles = [dep for dep in red.reads if not dep.is_indirect and dep.index.has(red.rvars[-1])
             and any(dep.index.has(v) for v in xvars)]
    if len(dims) < 2 or not tiles:
        return None
    index = sympy.expand(max(tiles, key=lambda dep: dep.footprint()).index)
    steps = [index.coeff(v) for v in xvars]
    if not all(c.is_Integer for c in steps) or any(a.has(v) for a in index.atoms(FloorDiv, ModIndex) for v in xvars):
        return None
    moving = [(abs(int(c)), k) for k, c in enumerate(steps) if c != 0]
    if not moving:
        return None
    least, k = min(moving, key=lambda t: (t[0], -t[1]))
    last = abs(int(steps[-1]))
    if k == len(dims) - 1 or (last != 0 and least >= last):
        return None
    order = tuple(j for j in range(len(dims)) if j != k) + (k,)
    return XOrder(tuple(int(red.sizes[d]) for d in dims), order)


def _tile_reads(n: SchedulerNode, inner_r: sympy.Symbol) -> tuple[list[sympy.Symbol], list[MemoryDep]]:
    """The node's variables other than `inner_r`, and its direct reads that move with both."""
    xvars = [v for v in n.vars if v is not inner_r]
    return xvars, [dep for dep in n.reads if not dep.is_indirect and dep.index.has(inner_r)
                   and any(dep.index.has(v) for v in xvars)]


def _row_nodes(g: FusionGroup) -> list[SchedulerNode]:
    """The group's nodes but its column partials, when a row reduction is among them (the
    partials then run in its kernel); else all of them."""
    rows = [n for n in g.nodes if not n.is_column_partial]
    return rows if any(n.kind == "reduction" for n in rows) else g.nodes


def _is_column_group(g: FusionGroup) -> bool:
    """Are the group's reductions all column partials (lower/column_partials.py), yet to join a
    row kernel?"""
    reductions = [n for n in g.nodes if n.kind == "reduction"]
    return bool(reductions) and all(n.is_column_partial for n in reductions)


def _strided_along_r(dep: MemoryDep, inner_r: sympy.Symbol, xvars: Sequence[sympy.Symbol]) -> bool:
    """Does a read that moves with both r and x step further along r than lanes along x would? A
    step of 1 is contiguous; a small step (a pooling window's stride, up to STRIDED_READ_MAX) still
    beats lanes along an x variable whose step is larger: a sum over the pooled positions of each
    image reads its rows two elements apart, where lanes along x would each read another image."""
    r_step = dep.index.coeff(inner_r)
    if r_step == 1:
        return False
    x_steps = [dep.index.coeff(v) for v in xvars if dep.index.has(v)]
    x_step = x_steps[-1] if x_steps else 0
    return not (r_step.is_Integer and x_step.is_Integer and 2 <= abs(int(r_step)) <= STRIDED_READ_MAX
                and abs(int(r_step)) < abs(int(x_step)))


def writes_along_r(g: FusionGroup) -> bool:
    """Does a node of the group that runs along r store its value contiguously along r? In an outer
    reduction that is an epilogue writing rows while the reduction reads columns (a column mean
    times a row vector, written row-major)."""
    inside = {n.name for n in g.nodes}
    for n, pl in g.placements():
        if pl is None or pl.cls != "r" or n.write is None or (n.users and n.users <= inside):
            continue  # only nodes whose value leaves the kernel are stored
        rv = pl.r_vars(n)
        if rv and pl.viewed(n, n.write.index).coeff(rv[-1]) == 1:
            return True
    return False


# a read whose innermost stride lies in this range walks a pooling window's stride, not a transpose
STRIDED_READ_MAX = 8
# elements read strided along r, against those read along it, from which a persistent row's
# lanes run along x
STRIDED_DOMINATES = 64


def reads_strided(g: FusionGroup) -> bool:
    """Does a pointwise group read a buffer from outside with a small stride (2 to STRIDED_READ_MAX
    elements) along its innermost loop dim? Pooling with stride 2 reads so: neighbouring lanes' loads
    cannot form vectors, and each of a lane's several elements issues its own loads."""
    if g.is_reduction:
        return False
    inside = {n.name for n in g.nodes}
    for n in g.nodes:
        for d in n.reads:
            if d.name in inside:
                continue
            strides = access_strides(d)
            if strides and 2 <= abs(strides[-1]) <= STRIDED_READ_MAX:
                return True
    return False


def merged_space(a: FusionGroup, b: FusionGroup) -> tuple[int, int, bool] | str:
    """The iteration space of a ∪ b, or why the two don't share one."""
    if a.is_reduction and b.is_reduction:
        if (a.numel, a.rnumel) != (b.numel, b.rnumel):
            for rows, cols in ((a, b), (b, a)):
                # column partials (with what shares their kernel so far) join the row kernel
                if _is_column_group(cols) and \
                        all(placement(n, rows.numel, rows.rnumel, True) is not None for n in cols.nodes):
                    return rows.numel, rows.rnumel, True
            return f"reductions over different spaces ({a.numel}, {a.rnumel}) vs ({b.numel}, {b.rnumel})"
        return a.numel, a.rnumel, True
    if not a.is_reduction and not b.is_reduction:
        if a.numel != b.numel:
            return f"pointwise numel {a.numel} vs {b.numel}"
        return a.numel, 1, False
    red, pw = (a, b) if a.is_reduction else (b, a)
    for n in pw.nodes:
        if placement(n, red.numel, red.rnumel, True) is None:
            return f"{n.name} with sizes {n.sizes} does not split into ({red.numel}, {red.rnumel})"
    return red.numel, red.rnumel, True


def reorders_loops(a: FusionGroup, b: FusionGroup) -> bool:
    """Would a node of a ∪ b run in the merged kernel with its loops reordered?"""
    space = merged_space(a, b)
    if isinstance(space, str) or not space[2]:
        return False
    return any((p := placement(n, space[0], space[1], True)) is not None and p.order is not None
               for n in a.nodes + b.nodes)


def scan_mix(a: FusionGroup, b: FusionGroup) -> str | None:
    """Why the scans of a ∪ b cannot share a kernel, else None: a scan's r loop carries its prefix
    in one direction, which a reduction's loop or a scan in the other direction cannot share."""
    nodes = a.nodes + b.nodes
    scans = [n for n in nodes if n.kind == "scan"]
    if not scans:
        return None
    if any(n.kind == "reduction" for n in nodes):
        return "a scan and a reduction do not share a kernel"
    if len({n.buffer.body.reverse for n in scans}) > 1:
        return "scans in opposite directions do not share a kernel"
    return None


def creates_cycle(a: FusionGroup, b: FusionGroup, graph: SchedulerGraph,
                  owner: dict[str, FusionGroup] | None = None) -> bool:
    """True if some node outside a ∪ b lies on a path between them — or, given `owner` (node name ->
    its current group), some other *group*: a group holding both a node that reads from a and a node
    that b reads from is a path a -> group -> b even when no single node is."""
    inside = a.names | b.names
    if owner is None:
        for first, second in ((a, b), (b, a)):
            for name in second.ancestors - inside:
                node = graph.by_name.get(name)
                if node is not None and node.ancestors & first.names:
                    return True
        return False

    def deps(g: FusionGroup) -> list[FusionGroup]:
        out = {}
        for n in g.nodes:
            for r in n.read_names:
                p = graph.producer.get(r)
                og = owner.get(p.name) if p is not None else None
                if og is not None and og is not g:
                    out[id(og)] = og
        return list(out.values())

    for first, second in ((a, b), (b, a)):
        stack = [g for g in deps(second) if g is not first]
        seen: set[int] = set()
        while stack:
            g = stack.pop()
            if id(g) in seen:
                continue
            seen.add(id(g))
            for d in deps(g):
                if d is first:
                    return True
                if d is not second:
                    stack.append(d)
    return False


def can_fuse(a: FusionGroup, b: FusionGroup, graph: SchedulerGraph, check_cycle: bool = True,
             owner: dict[str, FusionGroup] | None = None) -> str | None:
    """Legality only: None if a and b may become one kernel, else the reason they may not."""
    if a is b:
        return "same group"
    if a.is_extern or b.is_extern:
        return "ATen fallback kernels are not fused"
    space = shared_space(a, b)
    if isinstance(space, str):
        return space
    a_before_b = bool(a.names & b.ancestors)
    b_before_a = bool(b.names & a.ancestors)
    if a_before_b and b_before_a:
        return "each depends on the other"
    producer, consumer = (a, b) if a_before_b else (b, a)
    if a_before_b or b_before_a:
        why = reads_meet_writes(producer.nodes, consumer.nodes, space)
        if why is not None:
            return why
    # a group whose iteration space changes (pointwise nodes joining a reduction's rows) places its
    # nodes anew: its own producer-consumer pairs must still meet at one point in the new space
    if any(len(g.nodes) > 1 and (g.numel, g.rnumel, g.is_reduction) != space for g in (a, b)):
        whole = whole_group(a.nodes + b.nodes)
        if isinstance(whole, str):
            return whole
    if check_cycle and creates_cycle(a, b, graph, owner):
        return "fusion would create a cycle through an intermediate node"
    return None


def shared_space(a: FusionGroup, b: FusionGroup) -> tuple[int, int, bool] | str:
    """The iteration space one kernel of a ∪ b would run, or why there is none (devices, scans, sizes)."""
    if a.device != b.device:
        return f"different devices {a.device} and {b.device}"
    why = scan_mix(a, b)
    if why is not None:
        return why
    return merged_space(a, b)


def whole_group(nodes: Sequence[SchedulerNode]) -> FusionGroup | str:
    """The nodes as one kernel's group, or why they cannot be one. Legality is judged in the
    group's final iteration space (a reduction's, when it holds one), where each node's loops are
    placed as the kernel runs them. Judged pair by pair as nodes are added, an early pair meets a
    smaller space: a pointwise node reading a transposed producer is legal only once a reduction's
    space reorders the producer's loops (a vision model unfolding patches before a layer norm)."""
    nodes = sorted(nodes, key=lambda n: n.order)
    if len(nodes) == 1:
        return singleton(nodes[0])
    if any(n.kind == "extern" for n in nodes):
        return "ATen fallback kernels are not fused"
    # the space is built from the reductions first: two pointwise nodes of different sizes that
    # both fit a reduction's space (one per row, one per element) share no space of their own
    first = sorted(nodes, key=lambda n: not singleton(n).is_reduction)
    group = singleton(first[0])
    for n in first[1:]:
        space = shared_space(group, singleton(n))
        if isinstance(space, str):
            return space
        group = FusionGroup(group.nodes + [n], *space)
    group = FusionGroup(nodes, group.numel, group.rnumel, group.is_reduction)
    why = reads_meet_writes(nodes, nodes, (group.numel, group.rnumel, group.is_reduction))
    return group if why is None else why


def reads_meet_writes(producers: Sequence[SchedulerNode], consumers: Sequence[SchedulerNode],
                      space: tuple[int, int, bool]) -> str | None:
    """Why some consumer's read of a producer's output is not the element the producer writes at
    the same point of the kernel's iteration space (numel, rnumel, is a reduction), else None."""
    numel, rnumel, is_red = space
    written = {o: n for n in producers for o in n.outputs}
    for c in consumers:
        cp = placement(c, numel, rnumel, is_red)
        for dep in c.reads:
            p = written.get(dep.name)
            if p is None or p is c:
                continue
            if p.is_scatter:
                return f"{c.name} reads {p.name}, whose atomic adds are complete only when their kernel ends"
            if c.is_scatter and dep.name == c.buffer.body.target:
                return f"{c.name} adds into {dep.name}, which must be complete before its kernel starts"
            why = same_point(p, placement(p, numel, rnumel, is_red), c, cp, dep)
            if why is not None:
                return why
    return None


def shared_bytes(a: FusionGroup, b: FusionGroup) -> int:
    """Bytes of buffers both groups access (the memory traffic fusion can save). A buffer that one
    group's r loop reads along its rows and the other's along its columns saves nothing: the fused
    kernel's programs read a block of rows and a block of columns, not the same elements, and one
    of the two reads runs across its lanes (CLIP's loss: the log-sum-exp of each row and of each
    column of one logits matrix, fused, ran 1.5× the time of Inductor's two kernels). Inductor
    counts a shared read only where both index it alike."""
    total = 0
    common = a.accessed & b.accessed
    # column partials read their rows down columns, as the row kernel they join reads them along
    # rows: there both read the same elements (lower/column_partials.py)
    columns = a.is_reduction and b.is_reduction and (_is_column_group(a) or _is_column_group(b))
    for name in common:
        if not columns and _reads_transposed(_read_directions(a, name), _read_directions(b, name)):
            continue
        sizes = []
        for g in (a, b):
            for n in g.nodes:
                for dep in n.reads + ((n.write,) if n.write is not None else ()):
                    if dep.name == name:
                        dt = _dtype_of(g, n, name)
                        sizes.append(dep.footprint() * dt)
        if sizes:
            total += min(sizes)
    return total


def _read_directions(g: FusionGroup, name: str) -> set[str]:
    """Along which loop each read of `name` by a node in the group's r loop is contiguous: "r" (its
    innermost r variable steps by 1), "x" (the innermost x variable does, not the r one) or "-"."""
    out: set[str] = set()
    for n, pl in g.placements():
        if pl is None or pl.cls not in ("r", "red"):
            continue
        rv = [v for v, sz in zip(pl.r_vars(n), pl.r_sizes(n)) if sz != 1]
        xv = [v for v, sz in zip(pl.x_vars(n), pl.x_sizes(n)) if sz != 1]
        for dep in n.reads:
            if dep.name != name:
                continue
            index = pl.viewed(n, dep.index)
            if dep.is_indirect or not rv:
                out.add("-")
            elif index.coeff(rv[-1]) == 1:
                out.add("r")
            elif xv and index.coeff(xv[-1]) == 1:
                out.add("x")
            else:
                out.add("-")
    return out


def _reads_transposed(da: set[str], db: set[str]) -> bool:
    """Does one group read only along its rows and the other only along its columns?"""
    return {frozenset(da), frozenset(db)} == {frozenset({"r"}), frozenset({"x"})}


def _dtype_of(g: FusionGroup, n: SchedulerNode, name: str) -> int:
    return itemsize(n.buffer.dtype) if n.buffer is not None and n.buffer.name == name else 4


@dataclass
class FusionLog:
    """Every candidate pair considered and, when rejected, why (like TORCH_LOGS=fusion)."""

    rejected: list[tuple[str, str, str]] = field(default_factory=list)
    fused: list[tuple[str, str]] = field(default_factory=list)

    def reject(self, a: FusionGroup, b: FusionGroup, reason: str) -> None:
        self.rejected.append((a.describe(), b.describe(), reason))
        _fusion_log.debug("not fused: %s + %s: %s", a.describe(), b.describe(), reason)

    def fuse(self, a: FusionGroup, b: FusionGroup) -> None:
        self.fused.append((a.describe(), b.describe()))
        _fusion_log.debug("fused: %s + %s", a.describe(), b.describe())


def merge(a: FusionGroup, b: FusionGroup, graph: SchedulerGraph) -> FusionGroup:
    space = merged_space(a, b)
    assert not isinstance(space, str)
    nodes = sorted(a.nodes + b.nodes, key=lambda n: n.order)
    return FusionGroup(nodes, space[0], space[1], space[2])


def candidate_pairs(groups: list[FusionGroup], heur: Heuristics) -> list[tuple[FusionGroup, FusionGroup]]:
    by_buffer: dict[str, list[FusionGroup]] = {}
    for g in groups:
        for name in sorted(g.accessed):
            by_buffer.setdefault(name, []).append(g)
    seen: set[tuple[int, int]] = set()
    pairs = []
    for name in sorted(by_buffer):
        lst = sorted(by_buffer[name], key=lambda g: g.min_order)
        for i, g1 in enumerate(lst):
            for g2 in lst[i + 1: i + 1 + heur.pairwise_attempts]:
                key = (id(g1), id(g2))
                if key not in seen:
                    seen.add(key)
                    pairs.append((g1, g2))
    return pairs


def fuse_once(groups: list[FusionGroup], graph: SchedulerGraph, heur: Heuristics, log: FusionLog) -> list[FusionGroup]:
    scored = []
    for g1, g2 in candidate_pairs(groups, heur):
        why = can_fuse(g1, g2, graph, check_cycle=False)
        sb = shared_bytes(g1, g2) if why is None else 0
        if why is None:
            why = heur.can_fuse_profitably(g1, g2, sb)
        if why is not None:
            log.reject(g1, g2, why)
            continue
        scored.append((heur.score_fusion(g1, g2, sb), g1, g2))
    scored.sort(key=lambda t: t[0], reverse=True)
    current = {id(g): g for g in groups}
    owner = {n.name: g for g in groups for n in g.nodes}
    for _, g1, g2 in scored:
        a, b = owner[g1.nodes[0].name], owner[g2.nodes[0].name]
        if a is b:
            continue
        why = can_fuse(a, b, graph, check_cycle=True, owner=owner)
        if why is None:
            why = heur.can_fuse_profitably(a, b, shared_bytes(a, b))
        if why is not None:
            log.reject(a, b, why)
            continue
        m = merge(a, b, graph)
        log.fuse(a, b)
        del current[id(a)], current[id(b)]
        current[id(m)] = m
        for n in m.nodes:
            owner[n.name] = m
    return sorted(current.values(), key=lambda g: g.min_order)


def fuse_nodes(groups: list[FusionGroup], graph: SchedulerGraph, heur: Heuristics, log: FusionLog) -> list[FusionGroup]:
    for _ in range(heur.max_rounds):
        before = len(groups)
        groups = fuse_once(groups, graph, heur, log)
        if len(groups) == before or len(groups) == 1:
            break
    return groups


def topological_groups(groups: Iterable[FusionGroup], graph: SchedulerGraph) -> list[FusionGroup]:
    """Groups in an order where every group runs after the groups it reads from."""
    groups = list(groups)
    owner = {n.name: g for g in groups for n in g.nodes}
    deps = {id(g): {id(owner[a]) for a in g.ancestors if a in owner} for g in groups}
    done: set[int] = set()
    out: list[FusionGroup] = []
    pending = sorted(groups, key=lambda g: g.min_order)
    while pending:
        for g in pending:
            if deps[id(g)] <= done:
                out.append(g)
                done.add(id(g))
                pending.remove(g)
                break
        else:
            raise RuntimeError("cycle between fused groups")
    # an in-place update that returns nothing (a graph's input updates) runs after every other
    # group: nothing depends on it, and a group reading the input's old value must run before it
    sinks = [g for g in out if _is_sink(g)]
    return [g for g in out if not _is_sink(g)] + sinks


def _is_sink(g: FusionGroup) -> bool:
    return len(g.nodes) == 1 and g.nodes[0].kind == "extern" and not g.nodes[0].outputs \
        and g.nodes[0].extern.is_mutating
