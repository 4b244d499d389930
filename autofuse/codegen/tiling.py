"""2-D tiled pointwise kernels: the (y, x) split of a kernel's index space, its legality and default
tile, and the kernel header that indexes a [YBLOCK, XBLOCK] tile.

Note: a pointwise kernel whose store and loads are contiguous along different dims (a transpose,
NCHW <-> NHWC) walks one side with a stride when it runs over its flat index: each warp touches 32
cache lines. Tiled, the flat index is y * xnumel + x, with y the nodes' leading dims and x their
trailing ones, and a program owns a [YBLOCK, XBLOCK] tile: a load contiguous along y and a store
contiguous along x are both coalesced (Triton moves the values between the two layouts through
shared memory).
The split follows Inductor's rule (`SIMDScheduling.candidate_tilings` and `select_tiling`): each
direct load or store whose unit-stride dim is not the innermost, and is not followed by broadcast
dims alone, proposes the split just after that dim, scored by the elements it touches, doubled for a
store and doubled for each side that is a multiple of 32; a proposal scoring below the kernel's
numel (a broadcast operand) is dropped, a buffer proposes once, equal splits add up, and the best
split every member can take wins. Inductor tiles whenever such a split exists, whatever the size;
so does the default here.
The default tile is Inductor's too: 32 x 32 with 4 warps, shrunk to small sides with the other side
grown back to 1024 elements, and YBLOCK doubled while the y grid exceeds CUDA's 65535.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import sympy

from ..ir.index import prod, row_major_vars
from .config import next_pow2

if TYPE_CHECKING:
    from ..schedule.loops import Placement
    from ..schedule.nodes import MemoryDep, SchedulerNode

MAX_Y_PROGRAMS = 65535  # CUDA's limit on a grid's second dimension, where the y tiles go
TILE_SIDE = 32          # Inductor's default tile: 32 x 32, 4 warps
TILE_ELEMS = TILE_SIDE * TILE_SIDE
GOOD_SIZE = 32          # a side that is a multiple of this scores double (Inductor's is_good_size)


@dataclass(frozen=True)
class Tiling:
    """A pointwise kernel's index space as (ynumel, xnumel): flat index = y * xnumel + x."""

    ynumel: int
    xnumel: int


def access_strides(dep: "MemoryDep") -> list[int] | None:
    """Each loop variable's stride in the access (0 for a size-1 or absent dim); None if the index
    is indirect or its strides are not integers."""
    if dep.is_indirect:
        return None
    index = sympy.sympify(dep.index)
    zero = {s: sympy.Integer(0) for s, _ in dep.ranges}
    base = index.xreplace(zero)
    out = []
    for s, n in dep.ranges:
        if n == 1 or s not in index.free_symbols:
            out.append(0)
            continue
        d = sympy.sympify(index.xreplace(zero | {s: sympy.Integer(1)}) - base)
        if not d.is_Integer:
            return None
        out.append(int(d))
    return out


def _proposals(node: "SchedulerNode", inside: set[str], numel: int) -> list[tuple[str, int, int]]:
    """(buffer, xnumel, score) for each access of the node that proposes a split (module note)."""
    out = []
    deps = [(d, False) for d in node.reads if d.name not in inside] + ([(node.write, True)] if node.write else [])
    sizes = list(node.sizes)
    for dep, is_store in deps:
        strides = access_strides(dep)
        if strides is None or len(strides) != len(sizes) or 1 not in strides:
            continue
        split = strides.index(1) + 1
        if split == len(sizes) or all(s == 0 for s in strides[split:]):
            continue
        y, x = prod(sizes[:split]), prod(sizes[split:])
        score = prod([n for n, s in zip(sizes, strides) if s != 0])
        score *= (2 if is_store else 1) * (2 if _good(y) else 1) * (2 if _good(x) else 1)
        if score >= numel:
            out.append((dep.name, x, score))
    return out


def _good(size: int) -> bool:
    return size >= GOOD_SIZE and size % GOOD_SIZE == 0


def split_at(node: "SchedulerNode", xnumel: int) -> int | None:
    """How many of the node's leading dims are y when x spans `xnumel` elements, or None if its dims
    do not split there."""
    for k in range(len(node.sizes) + 1):
        if prod(node.sizes[k:]) == xnumel:
            return k
    return None


def choose_tiling(members: Sequence[tuple["SchedulerNode", "Placement"]]) -> Tiling | None:
    """The kernel's (y, x) split by Inductor's rule, or None when no access asks for one that every
    member can take."""
    nodes = [n for n, _ in members]
    if not nodes:
        return None
    numel = nodes[0].numel
    inside = {n.name for n in nodes}
    scores: dict[int, int] = {}
    seen: set[str] = set()
    for node in nodes:
        for name, x, score in _proposals(node, inside, numel):
            if name in seen:
                continue
            seen.add(name)
            scores[x] = scores.get(x, 0) + score
    for x in sorted(scores, key=lambda x: (-scores[x], x)):
        if 1 < x < numel and all(split_at(n, x) is not None for n in nodes):
            return Tiling(numel // x, x)
    return None


def why_not_tile2d(members: Sequence[tuple["SchedulerNode", "Placement"]], is_reduction: bool) -> str | None:
    """None when the kernel can run as 2-D tiles, else why not."""
    if is_reduction:
        return "2-D tiles are for pointwise kernels"
    if any(n.kind != "pointwise" or p.cls != "x" for n, p in members):
        return "2-D tiles are for pointwise nodes"
    if any(n.is_scatter for n, _ in members):
        return "a scatter's atomic adds run in 1-D blocks"
    if choose_tiling(members) is None:
        return ("no load or store is contiguous along a dim other than the innermost at a split "
                "every node's loops share")
    return None


def default_tile(tiling: Tiling, interpret: bool, interpreter_elems: int) -> tuple[int, int, int]:
    """(YBLOCK, XBLOCK, num_warps): Inductor's default 32 x 32 tile with 4 warps (1 warp under 128
    elements), each side at most its extent's power of two with the other grown back toward 1024
    elements (x first), and YBLOCK doubled while the y grid is over CUDA's limit. In the interpreter
    a tile takes up to `interpreter_elems` elements (fewer, larger programs run faster there)."""
    ycap, xcap = next_pow2(tiling.ynumel), next_pow2(tiling.xnumel)
    if interpret:
        x = min(xcap, interpreter_elems)
        y = max(1, min(ycap, interpreter_elems // x))
    else:
        x, y = min(TILE_SIDE, xcap), min(TILE_SIDE, ycap)
        while x < xcap and x * y < TILE_ELEMS:
            x *= 2
        while y < ycap and x * y < TILE_ELEMS:
            y *= 2
    while -(-tiling.ynumel // y) > MAX_Y_PROGRAMS:
        y *= 2
    return y, x, 4 if x * y >= 128 else 1




def tiled_vars(node: "SchedulerNode", tiling: Tiling) -> dict[sympy.Symbol, sympy.Expr]:
    """Each node variable as an expression of the tile's yindex and xindex (row-major in each)."""
    k = split_at(node, tiling.xnumel)
    assert k is not None, f"{node.name} {node.sizes} does not split at xnumel={tiling.xnumel}"
    ysym = sympy.Symbol("yindex", integer=True, nonnegative=True)
    xsym = sympy.Symbol("xindex", integer=True, nonnegative=True)
    exprs = row_major_vars(ysym, node.sizes[:k]) + row_major_vars(xsym, node.sizes[k:])
    return dict(zip(node.vars, exprs))


def tile_ranges(tiling: Tiling) -> dict[sympy.Symbol, int]:
    """yindex and xindex below ynumel and xnumel (a lane past them is masked)."""
    return {sympy.Symbol("yindex", integer=True, nonnegative=True): tiling.ynumel,
            sympy.Symbol("xindex", integer=True, nonnegative=True): tiling.xnumel}


def tile_header(tiling: Tiling, yblock: int, xblock: int, i64: str) -> list[str]:
    """The tiled kernel's first lines: y tiles on the grid's second axis, x tiles on its first, and
    `xmask` the whole tile's mask (a constant where both sides divide evenly)."""
    full = tiling.ynumel % yblock == 0 and tiling.xnumel % xblock == 0
    mask = ("xmask = tl.full([YBLOCK, XBLOCK], True, tl.int1)" if full
            else f"xmask = (yindex < {tiling.ynumel}) & (xindex < {tiling.xnumel})")
    return [f"yoffset = tl.program_id(1){i64} * YBLOCK",
            "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
            f"xoffset = tl.program_id(0){i64} * XBLOCK",
            "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]",
            mask]
