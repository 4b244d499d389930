"""Column partials in a row kernel: each program walks a share of the rows and sums their columns.

Note: a persistent row kernel that holds "col" members (lower/column_partials.py) runs one program
per row of the partials: program `xpid` walks its `rows_per` rows XBLOCK at a time, and each
step runs the row kernel's nodes as a persistent kernel runs them (the rows' reductions whole,
their epilogues), then adds each column sum's [XBLOCK, RBLOCK] values into an accumulator of that
shape. After the walk the accumulator is summed over its XBLOCK lanes, in lane order, and stored as
the program's row of partials (deterministic: no atomics). The rows are read once for both
reductions. Legal on a persistent, unsplit, untiled kernel whose column members are sums with one
share of rows; the plan checker and KernelWriter ask `why_not_columns`.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .accesses import Access
from .assembly import mask_line
from .config import LaunchConfig
from .printer import tl_dtype


def column_members(members: Sequence[tuple[SchedulerNode, Placement]]) -> list[tuple[SchedulerNode, Placement]]:
    return [(n, p) for n, p in members if p is not None and p.cls == "col"]


def why_not_columns(cfg: LaunchConfig, members: Sequence[tuple[SchedulerNode, Placement]]) -> str | None:
    """None when a kernel of these members runs its column partials under cfg (or has none)."""
    cols = column_members(members)
    if not cols:
        return None
    if not cfg.persistent or cfg.split != 1 or cfg.YBLOCK or cfg.online:
        return "column partials run in a persistent row kernel without split, tiles or online softmax"
    if len({n.rsizes[0] for n, _ in cols}) != 1:
        return "column partials with different shares of rows"
    if any(n.buffer.body.reduction_type != "sum" for n, _ in cols):
        return "column partials are sums"
    return None


def rows_per_program(members: Sequence[tuple[SchedulerNode, Placement]]) -> int:
    """Rows each program walks (0: the kernel has no column partials)."""
    cols = column_members(members)
    return cols[0][0].rsizes[0] if cols else 0


class ColumnsMixin:
    """KernelWriter's walk over a program's rows with column accumulators (reads the writer's
    state, set in KernelWriter.__init__)."""

    def _generate_columns(self, i64: str) -> None:
        rows_per = self.rows_per
        self.emit(f"xpid = tl.program_id(0){i64}")
        self.emit(f"rindex = tl.arange(0, RBLOCK)[None, :]{i64}")
        self.emit(self._rmask())
        accs: dict[str, tuple[str, torch.dtype]] = {}
        for node, _ in column_members(self.members):
            dtype = node.buffer.dtype
            accs[node.name] = (f"col_acc{len(accs)}", dtype)
            self.emit(f"col_acc{len(accs) - 1} = tl.full([XBLOCK, RBLOCK], 0, {tl_dtype(dtype)})")
        self.emit(f"for xstep in range(0, {rows_per}, XBLOCK):")
        self.push_scope()
        self.emit(f"xoffset = xpid * {rows_per} + xstep")
        self.emit("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
        self.emit(mask_line("xmask", f"xstep + tl.arange(0, XBLOCK)[:, None] < {rows_per}",
                            rows_per % self.config.XBLOCK == 0, "[XBLOCK, 1]"))
        self.emit("xrmask = xmask & rmask")

        def accumulate(node: SchedulerNode, pl: Placement) -> None:
            acc, dtype = accs[node.name]
            v, _ = self._reduction_input(node, pl)
            if v.dtype != dtype:
                v = self.to_dtype(v, dtype)
            self.emit(f"{acc} = {acc} + {v}")

        self._emit_rows(True, accumulate)
        self.pop_scope()
        for node, pl in column_members(self.members):
            acc, dtype = accs[node.name]
            total = self.cse(f"tl.reduce({acc}, 0, _fast_sum)[None, :]", dtype)
            self._store_columns(node, pl, total)

    def _store_columns(self, node: SchedulerNode, pl: Placement, value) -> None:
        """The program's row of partials: [1, RBLOCK] at row xpid."""
        self.outputs.append(node.name)
        ptr = f"out_ptr{len(self.outputs) - 1}"
        saved = self.current
        self.current = (node, pl)
        offsets = self.index_str(node.write.index, "col")
        self.current = saved
        self.accesses.append(Access(node.name, True, offsets))
        if "rindex" not in offsets:
            offsets = f"tl.broadcast_to({offsets}, [1, RBLOCK])"
        self.emit(f"tl.store(out_ptr_placeholder_{ptr} + ({offsets}), {value}, rmask)")
