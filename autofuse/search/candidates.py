"""The launch configs the kernel tuner considers: the legal candidates nearest the default (a
family at a time), one-knob neighbours for the refine, and the best of measured times."""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import fields, replace
from typing import Any, Callable

from ..codegen.config import FLAGS, LaunchConfig, next_pow2
from ..codegen.options import OPTIONS, KernelView, Option, option_neighbours, option_variants
from ..plan.apply import check_config
from ..plan.space import CONFIG_RANGES
from ..schedule.fusion import is_outer_reduction
from .settings import KernelTuneSettings

# Configs of one kernel considered before ranking, nearest the default first. A predictor that tells
# configs apart (a learned model) ranks more: cross-entropy's best loss-reduction configs (split 4 at
# 16-32 warps) are not among the first 48, and the model-only search picks a one-program config 4x
# slower there; with 160 all five suite cases meet the search claims
# (docs/costmodel.md, "Search quality"). Byte counts tie every config of a kernel, so a
# wider list would only widen their random exploration.
DEFAULT_CANDIDATES = 48


RANKED_CANDIDATES = 160


def candidate_limit(settings: KernelTuneSettings, predictor: Any) -> int:
    """How many configs per kernel the tuner considers: the setting, else by what ranks them."""
    if settings.max_candidates is not None:
        return settings.max_candidates
    return RANKED_CANDIDATES if getattr(predictor, "ranks_configs", False) else DEFAULT_CANDIDATES


def legal_options(group: Any) -> frozenset[tuple[str, bool]]:
    """(option, persistent) for each of the registry's options (codegen/options.py) the group allows
    on a persistent or a looped kernel."""
    view = KernelView.of(group)
    return frozenset((opt.name, persistent) for opt in OPTIONS for persistent in (False, True)
                     if opt.eligible(view, persistent, 1) is None)


def candidate_configs(group: Any, default: LaunchConfig, interpret: bool,
                      ranges: dict[str, dict[str, tuple[int, ...]]] = CONFIG_RANGES, limit: int = 48) -> list[LaunchConfig]:
    """Legal configs for the group: the default first, then each family's nearest the default, in turn."""
    kinds = ["pointwise"] if not group.is_reduction else ["persistent", "looped"]
    if group.is_reduction and is_outer_reduction(group):
        kinds.append("outer")
    known = {f.name for f in fields(LaunchConfig)}
    view = KernelView.of(group)
    legal: dict[tuple[str, bool, int], bool] = {}

    def eligible(opt: Option, persistent: bool, split: int) -> bool:
        key = (opt.name, persistent, split)
        if key not in legal:
            legal[key] = opt.eligible(view, persistent, split) is None
        return legal[key]

    out: dict[LaunchConfig, None] = {default: None}
    xmax = next_pow2(max(group.numel, 1))
    rfull = next_pow2(max(group.rnumel, 1))
    for kind in kinds:
        r = {k: v for k, v in ranges.get(kind, {}).items() if k in known}
        keys = list(r)
        for combo in itertools.product(*(r[k] for k in keys)):
            kw = dict(zip(keys, combo))
            if group.is_reduction:
                kw["persistent"] = kind == "persistent"
                if kind == "persistent":
                    kw["RBLOCK"] = rfull
                elif kind == "outer" and kw["RBLOCK"] >= rfull:
                    kw["persistent"] = True
                    kw["RBLOCK"] = rfull
                    kw["num_stages"] = 1  # no loop to pipeline (see CONFIG_RANGES)
                elif kw.get("RBLOCK", 1) > rfull:
                    continue  # a looped row of one step (RBLOCK = the row) stays: Inductor's two-read form
                elif kw.get("RBLOCK", 1) == rfull and kw.get("split", 1) == 1 and kw.get("num_stages", 1) > 1:
                    continue  # ... at num_stages 1 only: one step has nothing to pipeline (same SASS)
            cfg = LaunchConfig(**kw)
            if not _plausible(cfg, group, xmax):
                continue
            out[cfg] = None
            for twin in option_variants(cfg, interpret, eligible):  # both: the search measures whether it pays
                out[twin] = None
    near = sorted(list(out)[1:], key=distance_from(default))
    return [default] + interleave_families(near, rfull)[: max(0, limit - 1)]


def neighbour_configs(cfg: LaunchConfig, group: Any) -> list[LaunchConfig]:
    """Legal configs one step from cfg: XBLOCK, num_warps (and a looped reduction's RBLOCK) doubled
    or halved, num_stages back to 1 (it pays nowhere: plan/space.py CONFIG_RANGES), a flag toggled
    (cache_hints; a reduction's early_loads), persistent <-> looped (at half the row, with the flags
    kept and with cache_hints toggled or dropped, since whether a looped row pays depends on them;
    and at the whole row with hints: one loop step that reads the row twice, the second time from
    L2, the form of Inductor's max-autotune rmsnorm and layernorm kernels)."""
    out: list[LaunchConfig] = []
    reduction = group.is_reduction
    looped = reduction and not cfg.persistent
    rfull = next_pow2(max(group.rnumel, 1))
    for key in ("XBLOCK", "num_warps") + (("RBLOCK",) if looped and cfg.split == 1 else ()):
        v = getattr(cfg, key)
        out += [replace(cfg, **{key: v * 2}), replace(cfg, **{key: max(v // 2, 1)})]
    if cfg.num_stages != 1:
        out.append(replace(cfg, num_stages=1))
    out += option_neighbours(cfg, reduction)  # split doubled or halved, a flag toggled (codegen/options.py)
    if reduction:
        if cfg.split == 1 and rfull >= 2:
            if cfg.persistent:
                looped_twin = replace(cfg, persistent=False, RBLOCK=rfull // 2, early_loads=False)
                out += [looped_twin, replace(looped_twin, cache_hints=not looped_twin.cache_hints),
                        replace(cfg, persistent=False, early_loads=False, cache_hints=True)]  # one step, two reads
            elif not cfg.online:
                persistent_twin = replace(cfg, persistent=True, RBLOCK=rfull, num_stages=1)
                out += [persistent_twin, replace(persistent_twin, cache_hints=False)]
    xmax = next_pow2(max(group.numel, 1))
    out = [replace(c, num_stages=1) if _one_step(c, rfull) else c for c in out]
    keep = {c: None for c in out
            if c != cfg and not (not c.persistent and c.RBLOCK > rfull) and _plausible(c, group, xmax)}
    return list(keep)


def _plausible(cfg: LaunchConfig, group: Any, xmax: int) -> bool:
    """Legal, no wider than the kernel, and 1/4 to 128 elements per thread: outside that, threads
    idle or values no longer fit in registers (the candidates' and the neighbours' filter)."""
    elems = cfg.XBLOCK * (cfg.RBLOCK if group.is_reduction else max(cfg.YBLOCK, 1))
    return (cfg.XBLOCK * max(cfg.YBLOCK, 1) <= xmax and cfg.num_warps * 32 // 4 <= elems <= cfg.num_warps * 32 * 128
            and check_config(cfg, group) is None)


def _one_step(c: LaunchConfig, rfull: int) -> bool:
    """A looped row whose loop runs once (RBLOCK covers the row): it reads the row twice, the second
    time from L2, and its code is the same at every num_stages (identical SASS at 1-3 for rmsnorm,
    layernorm and the seed example at 4096 on sm_90)."""
    return not c.persistent and c.split == 1 and c.RBLOCK >= rfull > 1


def _family(c: LaunchConfig, rfull: int = 0) -> tuple:
    return (c.persistent, c.split > 1, c.XBLOCK >= 16 and c.RBLOCK <= 64 and not c.persistent,
            *(getattr(c, flag) for flag in FLAGS), _one_step(c, rfull), c.YBLOCK > 0)


def interleave_families(ranked: list[LaunchConfig], rfull: int = 0) -> list[LaunchConfig]:
    """Round-robin over config families (persistent/looped/one-step looped, split or not), each in
    rank order: when the predictor cannot tell configs apart (the byte-count estimate), the measured
    few still cover every kind of kernel instead of the default's nearest neighbours only. (The
    one-step rows, Inductor max-autotune's rmsnorm form, are 3 steps from our default and would
    otherwise fall outside the 48 candidates.)"""
    fams: dict[tuple, list[LaunchConfig]] = {}
    for c in ranked:
        fams.setdefault(_family(c, rfull), []).append(c)
    out: list[LaunchConfig] = []
    queues = list(fams.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def distance_from(default: LaunchConfig) -> Callable[[LaunchConfig], tuple]:
    """A sort key: a config's distance from `default` (log2 steps of each size, 4 per other change),
    ties broken by its JSON. Built once per kernel: a kernel's candidates number in the thousands."""
    db = default.to_json()

    def key(a: LaunchConfig) -> tuple:
        da = a.to_json()
        d = 0.0
        for k, v in da.items():
            w = db.get(k)
            if isinstance(v, bool) or not isinstance(v, int):
                d += 0 if v == w else 4
            else:
                d += abs(math.log2(max(v, 1)) - math.log2(max(w or 1, 1)))
        return (d, json.dumps(da, sort_keys=True))
    return key


def best_config(times: dict[LaunchConfig, float], default: LaunchConfig) -> LaunchConfig:
    """The fastest config; ties go to the default. A split config is one launch like any other
    (codegen/split.py), so its time compares as is: the tuner's timer hides host time, and the
    two-launch split had to be charged one launch (cross-entropy's split mean: 188 µs a call
    against 155 µs unsplit; docs/defaults.md)."""
    return min(times, key=lambda c: (times[c], c != default))

