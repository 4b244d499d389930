"""Which kernel outputs are stored into the buffer of an operand that dies in the kernel.

Note: a pointwise kernel whose operand is read for the last time there (a GELU after the matrix
product that made its input) can write its result over that operand instead of into a new buffer,
as Inductor's wrappers reuse such buffers (`# reuse`). Allocated anew, the result sits beside its
dead operand for the length of the kernel, and a model's forward peaks higher: ConvNeXt-T's MLP
at 1.67x torch.compile's peak memory. The operand must be read only at the element the kernel
writes and before the store (a later node's load of another element, or of the same element
under a mask of its own, would read the new value), cover dense memory of the output's size, be
read by no ATen call that may hand back a view of it and not be made by one (its storage could
be shared with a live tensor). A kernel that writes over its own operand cannot be rerun on the
same buffers, so only the program a call runs does it (as with input updates); the search times
kernels with separate buffers, and the kernels' sources are the same either way.
A returned output stored over an operand of another shape (soft-capped [batch, seq, vocab] logits
over their [tokens, vocab] product) is handed back as a view of that operand's memory.

A reduction kernel does it too (a softmax's probabilities over the scores that die in it, as
Inductor's reduction kernels store through the `in_out_ptr` they read). Its passes, recomputed
producers and hoisted loads decide where each load falls, so the rule reads the emitted kernel's
accesses (codegen/accesses.py): every load of the operand at the offsets of the output's one store,
issued before it. Equal offsets in kernel terms confine each program to its own rows, and a load in
an earlier pass of a looped reduction has finished before the row's reduction that the store
waits for.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import sympy

from ..codegen.accesses import Access
from ..ir.index import simplify_index
from .fusion import FusionGroup
from .nodes import MemoryDep
from .scheduler import SchedulerGraph


def reads_only_written_element(g: FusionGroup, writer: str, name: str, layout: Any) -> bool:
    """Does group g read `name` only at the memory element that node `writer` stores (its output
    laid out as `layout`), and read it before the store? A kernel issues a node's loads before its
    store and issues a load once per element (codegen's common subexpressions), so a node after
    the writer reads the old value only through a load made by the writer or a node before it,
    outside a masked() body (where a load carries its own mask)."""
    if g.is_extern or g.is_reduction or any(n.kind != "pointwise" for n in g.nodes):
        return False
    at = next(i for i, n in enumerate(g.nodes) if n.name == writer)
    sizes = tuple(g.nodes[at].sizes)
    loaded_before = any(name in n.unmasked_read_names for n in g.nodes[:at + 1])
    for i, n in enumerate(g.nodes):
        for dep in n.reads:
            if dep.name != name:
                continue
            if tuple(n.sizes) != sizes or not _same_index(dep, layout.index(n.vars)):
                return False
            if i > at and (name in n.masked_read_names or not loaded_before):
                return False
    return True


def _same_index(dep: MemoryDep, index: sympy.Expr) -> bool:
    """Is the read at `index` for every point of its ranges (a chain of views leaves floor
    divisions and remainders that only the ranges make trivial)?"""
    if sympy.expand(dep.index) == sympy.expand(index):
        return True
    ranges = dict(dep.ranges)
    return simplify_index(dep.index, ranges) == simplify_index(index, ranges)


def loads_before_store(accesses: Sequence[Access], w: str, d: str) -> bool:
    """Does the kernel store w once and issue every load of d before that store, at its offsets?"""
    stores = [i for i, a in enumerate(accesses) if a.store and a.buffer == w]
    if len(stores) != 1:
        return False
    at, offsets = stores[0], accesses[stores[0]].offsets
    loads = [(i, a) for i, a in enumerate(accesses) if not a.store and a.buffer == d]
    return bool(loads) and all(i < at and a.offsets == offsets for i, a in loads)


def donated_operands(graph: SchedulerGraph, groups: Sequence[FusionGroup], readers: dict[str, set[int]],
                     layouts: dict[str, Any], stored_of: Callable[[int], set[str]],
                     may_alias: Callable[[Any], bool], taken: set[str],
                     accesses: Callable[[int], Sequence[Access]] | None = None) -> dict[str, str]:
    """Kernel output -> the operand buffer it is stored into. `stored_of(gi)`: the buffers group gi's
    kernel stores; `may_alias(op)`: can an ATen op's result share storage with an argument;
    `taken`: buffers already stored elsewhere (input updates); `accesses(gi)`: the loads and stores
    of group gi's kernel as emitted (without it, reduction kernels keep their operands)."""
    aliasing_reads: set[str] = set()
    for g in groups:
        if g.is_extern and may_alias(g.nodes[0].extern.op):
            aliasing_reads |= set(g.nodes[0].read_names)
    out: dict[str, str] = {}
    donors: set[str] = set()
    for gi, g in enumerate(groups):
        if g.is_extern or (g.is_reduction and accesses is None):
            continue
        stored = stored_of(gi)
        order = {n.name: n.order for n in g.nodes}
        for w in sorted(stored, key=order.__getitem__):
            if w in taken or w not in layouts:
                continue
            for d in dict.fromkeys(r.name for n in g.nodes for r in n.reads):
                if _can_donate(graph, g, gi, readers, layouts, may_alias, aliasing_reads, taken | donors, w, d,
                               accesses):
                    out[w] = d
                    donors.add(d)
                    break
    return out


def _can_donate(graph: SchedulerGraph, g: FusionGroup, gi: int, readers: dict[str, set[int]],
                layouts: dict[str, Any], may_alias: Callable[[Any], bool], aliasing_reads: set[str],
                unavailable: set[str], w: str, d: str,
                accesses: Callable[[int], Sequence[Access]] | None) -> bool:
    producer = graph.producer.get(d)
    if producer is None or d in unavailable or d in graph.graph_outputs or d in aliasing_reads:
        return False
    if d in g.names or max(readers.get(d, {gi})) != gi:  # computed here, or read after this kernel
        return False
    if producer.kind == "extern" and may_alias(producer.extern.op):
        return False
    lay, wlay = layouts.get(d), layouts[w]
    if lay is None or not _same_storage(lay, wlay):
        return False   # (a returned output of another shape is handed over as a view of the memory that holds it)
    if g.is_reduction:
        return accesses is not None and loads_before_store(accesses(gi), w, d)
    return reads_only_written_element(g, w, d, wlay)


def _same_storage(a: Any, b: Any) -> bool:
    """Do a and b cover the same dense memory (a [512, 64] product and the [2, 16, 16, 64] view of
    its GELU)? Which element goes where, the reads' indices decide."""
    return (a.device == b.device and a.dtype == b.dtype and a.offset == b.offset == 0
            and a.storage_span() == a.numel == b.numel == b.storage_span())
