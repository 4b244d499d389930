"""Triton source for one fused group: pointwise, persistent reduction, or looped reduction.

Note: node bodies are evaluated on demand through the writer's ops-handler methods, with CSE per
scope (emitter.py, expressions.py). A load of a buffer produced inside the kernel returns the
producer's value (legality guaranteed it is the same element), so such a buffer is stored only if
something outside the kernel reads it (memory.py). In a looped reduction, nodes are split into
passes by how many in-kernel reductions they depend on (looped.py). A split reduction
(config.split > 1) stores partials, and its last program per x block combines them and runs the
epilogue (split.py). A scan is an r node whose value combines the row up to each position, carried
across the loop's steps (scan.py). A row kernel with column partials walks a share of the rows per
program (columns.py). KernelWriter is the entry point: it holds the kernel's state
and runs the parts in order; each part lives in the module of its concept.
"""
from __future__ import annotations

from typing import Sequence

import sympy
import torch

from ..ir.ops import OpsHandler
from ..schedule.loops import Placement, XOrder
from ..schedule.nodes import SchedulerNode
from .accesses import Access
from .assembly import AssemblyMixin, KernelSource, kernel_name
from .columns import ColumnsMixin, rows_per_program, why_not_columns
from .config import LaunchConfig
from .early_loads import early_loads
from .emitter import TV, Emitter, Scope
from .expressions import REDUCTION_DEFAULTS, ExpressionMixin
from .looped import LoopedMixin
from .memory import MemoryMixin
from .online import OnlineMixin, online_pairs
from .options import KernelView, why_not_options
from ..ir.ranges import Range
from .reduction import ReductionMixin
from .split import SplitMixin, split_chunk
from .tiling import choose_tiling

INT32_MAX = 2**31 - 1

__all__ = ["INT32_MAX", "REDUCTION_DEFAULTS", "KernelSource", "KernelWriter", "Scope", "TV", "kernel_name"]


class KernelWriter(ExpressionMixin, MemoryMixin, ReductionMixin, LoopedMixin, OnlineMixin, SplitMixin, ColumnsMixin,
                   AssemblyMixin, Emitter, OpsHandler):
    """Emits one kernel. Acts as the ops handler while a node body runs. `role`: "kernel" (the
    whole group), or for a split reduction "partial" (r loop, partials to workspaces), then
    "combine" in the last program's block (partials to values, then the x-loop nodes)."""

    def __init__(self, name: str, members: Sequence[tuple[SchedulerNode, Placement]], numel: int, rnumel: int,
                 reduction_kernel: bool, stored: set[str], dtypes: dict[str, torch.dtype], spans: dict[str, int],
                 config: LaunchConfig, interpret: bool, x_order: XOrder | None = None) -> None:
        Emitter.__init__(self)
        self.name = name
        self.members = list(members)
        self.by_buffer = {n.name: (n, p) for n, p in members}
        self.numel, self.rnumel = numel, rnumel
        self.reduction_kernel = reduction_kernel
        self.stored = stored
        self.dtypes = dtypes
        self.config = config
        self.interpret = interpret
        # the lanes' walk over x (schedule/loops.py): the logical x as digit symbols, their ranges, and each
        # digit as the lanes compute it from xindex (memory.py), made once for the kernel's every index
        self.x_lanes = (x_order.logical(sympy.Symbol("xindex", integer=True, nonnegative=True))
                        if x_order is not None and reduction_kernel else None)
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.mask_stack: list[str] = []
        self.current: tuple[SchedulerNode, Placement] | None = None
        self.indirect_names: dict[sympy.Symbol, str] = {}
        self.value_ranges: dict[str, Range] = {}   # a value's known (lo, hi), by name (ranges.py)
        self.known_truth: dict[str, bool] = {}     # a boolean value the ranges decide, by name
        self.masked_loads: dict[str, frozenset[str]] = {}   # a load's name -> the masks it was issued under
        self.direct_reads: set[str] = set()              # buffers loaded at an index of x/r alone
        self.gathers: dict[str, dict[str, int]] = {}     # buffer -> {indirect index: elements it loads}
        self.accesses: list[Access] = []                 # loads issued and stores, in program order
        self.persistent = config.persistent or not reduction_kernel
        self.split = config.split if reduction_kernel else 1
        self.role = "partial" if self.split > 1 else "kernel"
        self.rchunk = split_chunk(rnumel, self.split, config.RBLOCK) if self.split > 1 else 0
        why = why_not_options(config, KernelView(self.members, reduction_kernel, rnumel)) or \
            why_not_columns(config, self.members)
        assert why is None, f"{config} on kernel {name}: {why}"
        self.rows_per = rows_per_program(self.members)   # column partials: rows per program (columns.py)
        # a tiled pointwise kernel (tiling.py): yindex [YBLOCK, 1] and xindex [1, XBLOCK] index its tile
        self.tile = choose_tiling(self.members) if config.YBLOCK and not reduction_kernel else None
        self.online: dict[str, str] = {}  # sum -> the max it runs with, in the max's r loop (online.py)
        if config.online:
            self.online = online_pairs(self.members)
        self.chunk = self._online_chunk() if self.online else 1
        self.pass_index = 0   # the looped reduction's pass being emitted (cache hints)
        self.last_pass: dict[str, int] = {}
        self.workspaces: dict[str, torch.dtype] = {}  # partial kernel: reduction -> its workspace's dtype
        self.sorted_by: dict[str, tuple[str, str]] = {}   # 64-bit sort keys -> (sorted keys, positions) (scan.py)
        self.hoist: tuple[Scope, int] | None = None  # in an r loop: the scope and line before it (_hoisted_load)
        span = max(numel * max(rnumel, 1), numel * self.split, self.split * self.rchunk)
        self.use_int64 = span > INT32_MAX or any(v > INT32_MAX for v in spans.values())

    def generate(self) -> KernelSource:
        for line in ([] if self.rows_per else self._loop_header()):   # a column walk sets its x per step
            self.emit(line)
        i64 = ".to(tl.int64)" if self.use_int64 else ""
        x_loop = self.role != "partial"  # a split kernel's x-loop nodes run in its last program's block
        if not self.reduction_kernel:
            for node, pl in self.members:
                self.emit_pointwise(node, pl)
        elif self.rows_per:
            self._generate_columns(i64)
        elif self.persistent:
            base = "rsplit_start + " if self.role == "partial" else ""
            self.emit(f"rindex = {base}tl.arange(0, RBLOCK)[None, :]{i64}")
            self.emit(self._rmask())
            self.emit("xrmask = xmask & rmask")
            self._emit_rows(x_loop)
        else:
            self._generate_looped(i64, x_loop)
        if self.role == "partial":
            self._emit_last_program(i64)
        return self._assemble()

    def _emit_rows(self, x_loop: bool, column=None) -> None:
        """A persistent block of rows: early loads, then each member in order (the x-loop nodes
        unless a split kernel leaves them to its last program; a column partial through
        `column(node, placement)`, columns.py)."""
        if self.config.early_loads:
            self._emit_early_loads()
        for node, pl in self.members:
            if pl.cls == "red":
                self.emit_persistent_reduction(node, pl)
            elif pl.cls == "col":
                column(node, pl)
            elif x_loop or pl.cls == "r":
                self.emit_pointwise(node, pl)

    def _emit_early_loads(self) -> None:
        """early_loads.py: the loads of nodes after a reduction, first; the nodes' bodies find them in
        the CSE cache of this (the kernel's) scope when they run."""
        for node, pl, loads in early_loads(self.members):
            saved = self.current
            self.current = (node, pl)
            try:
                for name, index in loads:
                    self.load(name, index)
            finally:
                self.current = saved
