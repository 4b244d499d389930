"""Scheduler nodes: one per realized buffer or ATen fallback, with MemoryDep read/write sets."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ..ir.index import make_vars, prod
from ..ir.ops import AnalysisHandler, analyze
from ..ir.values import ComputedBuffer, ExternKernel, ReductionBody, ScanBody, ScatterBody


@dataclass(frozen=True)
class MemoryDep:
    """A read or write of `name` at `index`, a function of loop variables with the given ranges."""

    name: str
    index: sympy.Expr
    ranges: tuple[tuple[sympy.Symbol, int], ...]

    @functools.cached_property
    def symbols(self) -> frozenset[sympy.Symbol]:
        """The index's free symbols, found once: fusion asks for them of every read of every
        candidate pair (sympy walks the expression on each call)."""
        return frozenset(self.index.free_symbols)

    @functools.cached_property
    def is_indirect(self) -> bool:
        known = {s for s, _ in self.ranges}
        return any(s not in known for s in self.symbols)

    def footprint(self) -> int:
        """Elements this access touches (broadcast dims count once)."""
        used = self.symbols
        return prod([n for s, n in self.ranges if s in used]) if not self.is_indirect else prod([n for _, n in self.ranges])

    def __str__(self) -> str:
        rng = ", ".join(f"{s}: {n}" for s, n in self.ranges)
        return f"MemoryDep('{self.name}', {self.index}, {{{rng}}})"


@dataclass(eq=False)
class SchedulerNode:
    name: str
    order: int
    kind: str  # "pointwise" | "reduction" | "scan" | "extern"
    buffer: ComputedBuffer | None = None
    extern: ExternKernel | None = None
    sizes: tuple[int, ...] = ()
    rsizes: tuple[int, ...] = ()
    reads: tuple[MemoryDep, ...] = ()
    write: MemoryDep | None = None
    origins: frozenset[str] = frozenset()
    outputs: tuple[str, ...] = ()
    read_names: frozenset[str] = frozenset()
    masked_read_names: frozenset[str] = frozenset()    # buffers loaded inside a masked() body
    unmasked_read_names: frozenset[str] = frozenset()  # buffers loaded outside one
    users: set[str] = field(default_factory=set)
    ancestors: frozenset[str] = frozenset()

    @property
    def numel(self) -> int:
        return prod(self.sizes)

    @property
    def rnumel(self) -> int:
        return prod(self.rsizes) if self.kind == "reduction" else 1

    @property
    def vars(self) -> list[sympy.Symbol]:
        return make_vars("i", len(self.sizes))

    @property
    def rvars(self) -> list[sympy.Symbol]:
        return make_vars("r", len(self.rsizes))

    @property
    def is_scatter(self) -> bool:
        return self.buffer is not None and self.buffer.is_scatter

    @property
    def is_column_partial(self) -> bool:
        return self.buffer is not None and self.buffer.is_column_partial

    def run_body(self, ops: Any) -> Any:
        body = self.buffer.body
        if isinstance(body, ReductionBody):
            return body.inner_fn(ops, self.vars, self.rvars)
        if isinstance(body, ScanBody):  # sizes are the scan's iteration order (ScanBody.iter_size)
            return body.inner_fn(ops, body.position(self.vars))
        if isinstance(body, ScatterBody):   # the position's loads are the node's reads too
            self.scatter_index(ops)
        return body.inner_fn(ops, self.vars)

    def scatter_index(self, ops: Any) -> sympy.Expr:
        """A scatter node's store offset into its output (indirect symbols of `ops` in it)."""
        return self.buffer.layout.index(self.buffer.body.position(ops, self.vars))

    def __repr__(self) -> str:
        return f"SchedulerNode({self.name}, {self.kind}, sizes={self.sizes}, rsizes={self.rsizes})"


def node_for_buffer(buf: ComputedBuffer, order: int) -> SchedulerNode:
    body = buf.body
    is_red, is_scan = isinstance(body, ReductionBody), isinstance(body, ScanBody)
    sizes = tuple(body.iter_size) if is_scan else tuple(body.size)
    rsizes = tuple(body.rsize) if is_red else ()
    kind = "reduction" if is_red else ("scan" if is_scan else "pointwise")
    node = SchedulerNode(buf.name, order, kind, buffer=buf,
                         sizes=sizes, rsizes=rsizes, origins=buf.origins, outputs=(buf.name,))
    ranges = tuple(zip(node.vars, sizes)) + tuple(zip(node.rvars, rsizes))
    info = analyze(lambda ops: node.run_body(ops))
    node.reads = tuple(dict.fromkeys(MemoryDep(n, sympy.expand(i), ranges) for n, i in info.loads))
    node.read_names = frozenset(n for n, _ in info.loads)
    node.masked_read_names = frozenset(n for n, _ in info.masked_loads)
    node.unmasked_read_names = frozenset(n for n, _ in info.unmasked_loads)
    wranges = tuple(zip(node.vars, sizes))
    if isinstance(body, ScatterBody):
        # adds into the target's memory, at indices read from a tensor: a read of the target that
        # no producer's store meets (fusion keeps the two apart, schedule/fusion.py)
        node.write = MemoryDep(buf.name, sympy.expand(node.scatter_index(AnalysisHandler())), wranges)
        if body.target is not None:
            node.reads += (MemoryDep(body.target, node.write.index, wranges),)
            node.read_names |= {body.target}
        return node
    position = body.position(node.vars) if is_scan else node.vars
    node.write = MemoryDep(buf.name, sympy.expand(buf.layout.index(position)), wranges)
    return node


def node_for_extern(kernel: ExternKernel, order: int) -> SchedulerNode:
    outs: list[str] = []

    def collect(o: Any) -> None:
        if isinstance(o, (list, tuple)):
            for x in o:
                collect(x)
        elif hasattr(o, "layout"):
            outs.append(o.name)

    collect(kernel.outputs)
    return SchedulerNode(kernel.name, order, "extern", extern=kernel, origins=kernel.origins,
                         outputs=tuple(outs), read_names=frozenset(kernel.reads))


def itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
