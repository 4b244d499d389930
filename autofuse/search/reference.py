"""The reduction configs Inductor's default mode would time for a kernel of this shape, in autofuse's
config space: measured by the compile-time autotune beside the cost model's picks.

Note: the autotune measures the default and the cost model's three best-ranked configs. On a kernel
unlike the model's training data the ranking can miss every good config: on a logsumexp over 94
columns of a transposed bf16 input, the fastest of those is 64 × 64 looped on 16 warps (29.4 µs on
an H100) where torch.compile's kernel, from its own few timed configs, takes 17.2 µs
(docs/defaults.md, "Autotuning at compile").
Measuring the configs Inductor's heuristics would time for the same reduction makes the floor what
torch.compile users get, whatever the model ranks; the search still finds better. The rules follow
Inductor's reduction heuristics (`triton_heuristics.py`: the persistent rows of up to 4096
elements a program, the contiguous, outer, tiny and fixed looped tiles, warps from the tile's
elements) by the hint Inductor would give: `inner` rows read along r, `outer` rows read across it,
`mixed` both (Inductor's default hint, which times the whole set).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..codegen.config import LaunchConfig, next_pow2
from ..codegen.device import DeviceFacts, device_facts
from ..plan.apply import check_config

PERSISTENT_BLOCK_MAX = 4096   # elements a persistent program holds (x rows × the row), as Inductor's
PERSISTENT_ROW_MAX = {"inner": 1024, "outer": 64, "mixed": 64}   # the rows Inductor runs persistent
LOOPED_R_MAX = 2048           # the longest r step of a looped row


def reference_configs(group: Any, default: LaunchConfig, hint: str) -> list[LaunchConfig]:
    """Legal reduction configs of the group that Inductor's default mode would time under `hint`
    ("inner", "outer" or "mixed"), with the default's fast_tanh and eviction hints where legal;
    empty for other kernels. Where Inductor would split the row (`inductor_splits`), they keep the
    default's split, tiled for one chunk of the row; elsewhere they are unsplit."""
    if not group.is_reduction or default.YBLOCK:
        return []
    xnumel, rnumel = max(group.numel, 1), max(group.rnumel, 1)
    split = default.split if default.split > 1 and inductor_splits(xnumel, rnumel, device_facts(group.device)) else 1
    rnumel = -(-rnumel // split)   # a split's programs each reduce one chunk of the row
    xmax, rfull = next_pow2(xnumel), next_pow2(rnumel)
    loads = len({dep.name for n in group.nodes for dep in n.reads})
    out: list[LaunchConfig] = []
    for x, r, warps, persistent in _shapes(xnumel, xmax, rfull, loads, hint):
        x, r = _fitted(x, r, xmax, rfull)
        w = warps if warps is not None else _warps(x * r, 8 if persistent else 16)
        base = LaunchConfig(XBLOCK=x, RBLOCK=rfull if persistent else r, num_warps=w, persistent=persistent,
                            split=split, fast_tanh=default.fast_tanh, cache_hints=default.cache_hints)
        plain = replace(base, cache_hints=False, fast_tanh=False)
        for cfg in (base, replace(base, cache_hints=not base.cache_hints), replace(base, fast_tanh=False), plain):
            if check_config(cfg, group) is None:
                if cfg not in out and cfg != default:
                    out.append(cfg)
                break
    return out


def inductor_splits(xnumel: int, rnumel: int, device: DeviceFacts) -> bool:
    """Would Inductor split this reduction into partial rows? Only where its outputs are too few to
    fill the GPU (under two per SM) and its rows are long (over 8192 elements); elsewhere it runs
    one program per row block, and so do the reference configs."""
    return xnumel < 2 * device.sm_count and rnumel > 8192


def _shapes(xnumel: int, xmax: int, rfull: int, loads: int, hint: str
            ) -> list[tuple[int, int, int | None, bool]]:
    """(XBLOCK, RBLOCK, num_warps or None for the tile's rule, persistent) for the hint."""
    if rfull <= PERSISTENT_ROW_MAX.get(hint, 64):
        rows = [x for x in (1, 8, 32, 128) if x == 1 or (x * rfull <= PERSISTENT_BLOCK_MAX and x <= xnumel)]
        if hint == "inner" and rfull >= 256:   # rows under 256 elements get every row count
            if rfull <= 1024 and xnumel // 8 >= 128:   # a few rows a program, one warp
                return [(min(1024 // rfull, 8), rfull, 1, True), (1, rfull, _warps(rfull, 8), True)]
            rows = rows[:1]
        elif hint == "outer":
            rows = rows[-1:]
        return [(x, rfull, None, True) for x in rows]
    contiguous = (2 if rfull <= LOOPED_R_MAX else 1, min(rfull, LOOPED_R_MAX), None, False)
    tiny = (2 * (256 // rfull) if rfull <= 256 else 1, min(rfull, LOOPED_R_MAX), None, False)
    outer = _outer_tile(xmax, rfull, loads)
    if hint == "inner":
        return [contiguous]
    if hint == "outer":
        return [outer]
    return [contiguous, outer, tiny, (64, 64, None, False), (8, 512, None, False), (64, 4, 8, False)]


def _outer_tile(xnumel: int, rfull: int, loads: int) -> tuple[int, int, int | None, bool]:
    """Inductor's tile for a reduction read across its rows (`xnumel` rounded up to a power of two):
    more x lanes the more rows there are, a longer r step where the loop body is heavy."""
    if xnumel <= 1024:
        return max(min(xnumel // 128, 8), 2), min(rfull, 64), None, False
    if xnumel // 4096 <= 8:
        return 16, 32, None, False
    x = max(min(256, next_pow2(xnumel // 4096)), 64)
    if loads < 4 or rfull <= 128:
        return x, 512 // x, None, False
    return min(x, 32), 64 if rfull >= 2048 else 32, 4, False


def _fitted(x: int, r: int, xmax: int, rfull: int) -> tuple[int, int]:
    """The tile shrunk to the kernel's sizes, then grown back along x, then r, to its elements (an
    eighth of them where the whole kernel is smaller), as Inductor fits its tiles."""
    target = x * r if xmax * rfull >= x * r else x * r // 8
    x, r = min(x, xmax), min(r, rfull)
    while x < xmax and x * r < target:
        x *= 2
    while r < rfull and x * r < target:
        r *= 2
    return x, r


def _warps(elements: int, most: int) -> int:
    """A warp per 128 elements of the tile, a power of two from 2 to `most`."""
    return min(max(next_pow2(max(elements // 128, 1)), 2), most)
