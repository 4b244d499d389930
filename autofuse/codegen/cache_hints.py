"""cache_hints: L2 hints on a kernel's memory traffic, the policy Inductor's codegen applies to
reductions, and streaming stores on pointwise kernels.

Note: in a reduction kernel a load inside the r loop (or a persistent reduction's block) gets
  - `evict_last` when its index does not vary along x: every program reads it (a norm's weight);
  - in a looped reduction, `evict_last` when a later pass of the kernel reads the same buffer again
    (layernorm reads its row for the statistics, then again to normalise: the second read should
    hit L2), and `evict_first` on the buffer's last pass (nothing reads it again);
  - no hint otherwise (a persistent reduction's row, read once, as Inductor leaves it).
Loads inside masked() regions and gathers are left alone. In a pointwise kernel the stores get
`.cs` (cache streaming: L2 may drop the line first), the one hand-written form that paid on SwiGLU
(0.2%; evict_first loads and grid-stride programs lost 5-17%). Through codegen it is worth 0.03%
over 6 configs, yet the tune picks it for SwiGLU's winning config; a later kernel that reads the output
finds less of it in L2, which the search weighs by measuring. The hints change no value, only what
L2 keeps. They are a choice in the config space the search measures; by default only looped row
reductions on the GPU carry them, where they were measured to pay (Heuristics.launch_config).
"""
from __future__ import annotations

from typing import Sequence

import sympy

from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .early_loads import top_level_loads

XINDEX = "xindex"


def varies_along_x(index: sympy.Expr, node: SchedulerNode, pl: Placement) -> bool:
    """Whether the load's offset, in kernel terms, depends on the kernel's x index."""
    expr = sympy.sympify(index).xreplace(pl.kernel_vars(node))
    return any(s.name == XINDEX for s in expr.free_symbols)


def hint(broadcast: bool, persistent: bool, this_pass: int, last_pass: int) -> str | None:
    """The eviction policy of one direct load in the r loop (or persistent block)."""
    if broadcast:
        return "evict_last"
    if persistent:
        return None
    return "evict_last" if this_pass < last_pass else "evict_first"


def last_passes(members: Sequence[tuple[SchedulerNode, Placement]], phase: dict[str, int]) -> dict[str, int]:
    """Buffer -> the last pass of a looped reduction whose r-loop nodes read it."""
    out: dict[str, int] = {}
    for node, pl in members:
        if pl.cls in ("r", "red"):
            for name in node.read_names:
                out[name] = max(out.get(name, 0), phase.get(node.name, 0))
    return out


def why_not_cache_hints(members: Sequence[tuple[SchedulerNode, Placement]], is_reduction: bool,
                        persistent: bool) -> str | None:
    """None when cache_hints puts a hint on some load (a reduction) or store (a pointwise kernel)
    of this kernel, else why not — the one rule plans check, the search and codegen ask."""
    if not is_reduction:
        return None if members else "the kernel stores nothing"
    if any(node.kind == "scan" for node, _ in members):
        return "a scan kernel takes no cache hints (not measured)"
    inside = {n.name for n, _ in members}
    for node, pl in members:
        if pl.cls not in ("r", "red"):
            continue
        for name, index in top_level_loads(node):
            if name not in inside and (not persistent or not varies_along_x(index, node, pl)):
                return None
    return "no load in the reduction's loop gets a hint" if not persistent else \
        "no load in the reduction's block is read by every program"
