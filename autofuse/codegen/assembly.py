"""A kernel's frame: its header (program ids, indices, masks), its parameters, its function text
and the KernelSource the compiler loads.

Note: masks that are always true (the sizes are fixed per specialization, so every lane of every
block is in range) are emitted as constants Triton folds away: no compare, no select, unpredicated
loads. The parameters follow the launcher's order: inputs, outputs, a split reduction's
workspaces and counter, the sizes, then the block sizes as constexprs. The source is the prelude
(helpers every kernel may call), the scan helpers if the kernel scans, then the function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .accesses import Access
from .config import LaunchConfig
from .prelude import prelude
from .scan import SCAN_HELPERS, SORT_HELPERS, is_scan_kernel, is_sort_kernel
from .split import SplitWorkspaces, partial_header
from .tiling import Tiling, tile_header


@dataclass(frozen=True)
class KernelSource:
    name: str
    source: str
    arg_names: tuple[str, ...]
    kind: str  # "pointwise" | "reduction"
    numel: int
    rnumel: int
    config: LaunchConfig
    split: SplitWorkspaces | None = None  # a split reduction's workspaces and counters
    tile: Tiling | None = None  # a 2-D tiled pointwise kernel's (y, x) split (tiling.py)
    accesses: tuple[Access, ...] = ()  # loads issued and stores, in program order (accesses.py)
    programs: int = 0  # a row kernel with column partials: its grid, one program per row of partials (columns.py)


def mask_line(name: str, cond: str, full: bool, shape: str) -> str:
    """`name = cond`, or an all-true constant of `shape` when every lane is in range."""
    return f"{name} = tl.full({shape}, True, tl.int1)" if full else f"{name} = {cond}"


def kernel_name(kind: str, persistent: bool, origins: Sequence[str], index: int | None, max_ops: int = 8) -> str:
    """`triton_{poi|per|red|scan}_fused_{ops}_{index}`; without the index for a kernel's source."""
    prefix = "poi" if kind == "pointwise" else "scan" if kind == "scan" else ("per" if persistent else "red")
    ops = sorted(set(origins))
    if len(ops) > max_ops:
        ops = ops[:max_ops]
    base = f"triton_{prefix}_fused_{'_'.join(ops) or 'copy'}"
    return base if index is None else f"{base}_{index}"


class AssemblyMixin:
    """KernelWriter's header lines and final assembly (reads the writer's state, set in
    KernelWriter.__init__)."""

    def _full_x(self) -> bool:
        """Every x lane of every block is in range, so the mask is a constant Triton folds away (no
        compare, no select, unpredicated loads): the sizes are fixed per specialization."""
        return self.config.XBLOCK > 0 and self.numel % self.config.XBLOCK == 0

    def _full_r(self) -> bool:
        """The same along r: a persistent row fits RBLOCK exactly, or the loop's steps (a split's
        chunks, each a multiple of RBLOCK) tile rnumel exactly."""
        rb = self.config.RBLOCK
        if self.split > 1:
            return self.rchunk * self.split == self.rnumel
        return self.rnumel == rb if self.persistent else rb > 0 and self.rnumel % rb == 0

    def _rmask(self) -> str:
        # the sizes as literals, not the rnumel / xnumel arguments: Triton sees a literal's
        # divisibility (1000 = 8 x 125), so a mask that cuts rows of 1000 stays constant over 8
        # lanes and their loads 16 bytes wide; an argument not divisible by 16 gets no such fact
        return mask_line("rmask", f"rindex < {self.rnumel}", self._full_r(), "[1, RBLOCK]")

    def _loop_header(self) -> list[str]:
        i64 = ".to(tl.int64)" if self.use_int64 else ""
        full_x = self._full_x()
        if self.tile is not None:
            return tile_header(self.tile, self.config.YBLOCK, self.config.XBLOCK, i64)
        if not self.reduction_kernel:
            return [f"xoffset = tl.program_id(0){i64} * XBLOCK",
                    "xindex = xoffset + tl.arange(0, XBLOCK)",
                    mask_line("xmask", f"xindex < {self.numel}", full_x, "[XBLOCK]")]
        lines = [f"xoffset = tl.program_id(0){i64} * XBLOCK",
                 "xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
                 mask_line("xmask", f"xindex < {self.numel}", full_x, "[XBLOCK, 1]")]
        if self.role == "partial":
            lines += partial_header(self.rchunk, i64)
        return lines

    def _buffer_params(self, workspaces: int) -> list[str]:
        return ([f"in_ptr{i}" for i in range(len(self.inputs))] + [f"out_ptr{i}" for i in range(len(self.outputs))]
                + [f"ws_ptr{i}" for i in range(workspaces)])

    def _function(self, params: list[str]) -> str:
        body = "\n".join(self.lines).replace("out_ptr_placeholder_", "")
        return f"\n\n@triton.jit\ndef {self.name}({', '.join(params)}):\n{body}\n"

    def _assemble(self) -> KernelSource:
        split = SplitWorkspaces(self.split, tuple(self.workspaces.values())) if self.role == "partial" else None
        params = self._buffer_params(len(self.workspaces)) + (["split_counter"] if split else [])
        params += ["xnumel"] + (["rnumel"] if self.reduction_kernel else [])
        params += ["XBLOCK: tl.constexpr"] + (["RBLOCK: tl.constexpr"] if self.reduction_kernel else [])
        if self.tile is not None:  # a tiled kernel: ynumel, xnumel, YBLOCK, XBLOCK (the launcher's order)
            params = params[:-2] + ["ynumel", "xnumel", "YBLOCK: tl.constexpr", "XBLOCK: tl.constexpr"]
        src = prelude(self.interpret) + (SCAN_HELPERS if is_scan_kernel(self.members) else "") + \
            (SORT_HELPERS if is_sort_kernel(self.members) else "") + self._function(params)
        return KernelSource(self.name, src, tuple(self.inputs) + tuple(self.outputs),
                            "reduction" if self.reduction_kernel else "pointwise", self.numel, self.rnumel,
                            self.config, split, self.tile, tuple(self.accesses),
                            self.numel // self.rows_per if self.rows_per else 0)
