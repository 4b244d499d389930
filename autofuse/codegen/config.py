"""LaunchConfig: the per-kernel launch parameters, an explicit value chosen by heuristics or a plan."""
from __future__ import annotations

from dataclasses import dataclass, fields


def next_pow2(n: int) -> int:
    """The smallest power of two at least n (1 for n <= 1): Triton block sizes are powers of two."""
    p = 1
    while p < n:
        p *= 2
    return p


@dataclass(frozen=True)
class LaunchConfig:
    """`split` > 1 (reductions only): the r range is cut into `split` chunks reduced by separate
    programs (grid x-blocks × split) into a workspace, and each x block's last program combines the
    partials — more programs for a reduction whose x grid alone cannot fill the GPU, in one launch
    (see codegen/split.py).
    `online` (looped reductions only): a sum(exp(v - max(v))) runs in the max's r loop, so the row
    is read once less (see codegen/online.py). `fast_tanh`: tanh through the hardware's approximation,
    for kernels whose every value is 16-bit (see codegen/fast_math.py). `early_loads` (persistent
    reductions): the loads of nodes after a reduction are issued before it (see
    codegen/early_loads.py). `cache_hints`: L2 eviction hints on a reduction's loads, as Inductor
    gives them, or streaming (`.cs`) stores in a pointwise kernel (see codegen/cache_hints.py).
    `YBLOCK` > 0 (pointwise kernels): the index space split into (y, x) and run as [YBLOCK, XBLOCK]
    tiles, so loads and stores contiguous along different dims are all coalesced (see
    codegen/tiling.py); 0 is a 1-D kernel."""

    XBLOCK: int
    RBLOCK: int = 1
    num_warps: int = 4
    num_stages: int = 1
    persistent: bool = True
    split: int = 1
    online: bool = False
    fast_tanh: bool = False
    early_loads: bool = False
    cache_hints: bool = False
    YBLOCK: int = 0

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}   # asdict's deep copies cost 10x (flat fields)
        if self.split == 1:
            del d["split"]  # plans written before split existed keep their exact JSON
        for flag in FLAGS:
            if not d[flag]:
                del d[flag]
        if not self.YBLOCK:
            del d["YBLOCK"]
        return d

    def __str__(self) -> str:
        kind = "persistent" if self.persistent else "looped"
        text = f"XBLOCK={self.XBLOCK} RBLOCK={self.RBLOCK} num_warps={self.num_warps} num_stages={self.num_stages} {kind}"
        return text + (f" split={self.split}" if self.split > 1 else "") \
            + "".join(f" {flag}" for flag in FLAGS if getattr(self, flag)) + (f" YBLOCK={self.YBLOCK}" if self.YBLOCK else "")


# The on/off options of a config (every bool field but `persistent`, in field order): each has its
# entry in the option registry (codegen/options.py) and a 0/1 column of the cost model's features.
FLAGS: tuple[str, ...] = tuple(f.name for f in fields(LaunchConfig) if f.type in (bool, "bool") and f.name != "persistent")
