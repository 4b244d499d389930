"""Apply a FusionPlan to a lowered graph: every node placed once, every kernel legal, no cycles,
every config possible — or a PlanError that says which check failed. Plans are never repaired."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..codegen.config import LaunchConfig
from ..codegen.columns import why_not_columns
from ..codegen.options import KernelView, why_not_options
from ..codegen.scan import has_row_sort
from ..codegen.config import next_pow2
from ..schedule.fusion import FusionGroup, topological_groups, whole_group
from ..schedule.scheduler import SchedulerGraph
from .graph_hash import graph_hash
from .plan import FusionPlan, KernelPlan, PlanError


def graph_key(gm: torch.fx.GraphModule, args: Sequence[Any]) -> str:
    """Identifies the graph a plan was made for: the structural graph hash (the tuning DB's key)."""
    return graph_hash(gm, args)


def node_id(node: Any) -> str:
    owner = node.extern if node.kind == "extern" else node.buffer
    return owner.node_id or node.name


def check_config(cfg: LaunchConfig, group: FusionGroup) -> str | None:
    """None when cfg is possible on the group, else why not: the launch numbers here, the options
    (split, online, ...) as codegen/options.py defines them."""
    def pow2(v: int) -> bool:
        return v >= 1 and v & (v - 1) == 0
    if not pow2(cfg.XBLOCK) or cfg.XBLOCK > 1 << 16:
        return f"XBLOCK={cfg.XBLOCK} is not a power of two in [1, 65536]"
    if cfg.num_warps not in (1, 2, 4, 8, 16, 32):
        return f"num_warps={cfg.num_warps} is not one of 1, 2, 4, 8, 16, 32"
    if not 1 <= cfg.num_stages <= 8:
        return f"num_stages={cfg.num_stages} is outside [1, 8]"
    if group.is_reduction:
        if not pow2(cfg.RBLOCK) or cfg.RBLOCK > 1 << 16:
            return f"RBLOCK={cfg.RBLOCK} is not a power of two in [1, 65536]"
        if cfg.persistent and cfg.split == 1 and cfg.RBLOCK < next_pow2(group.rnumel):
            return f"persistent reduction with RBLOCK={cfg.RBLOCK} < rnumel={group.rnumel}"
        if cfg.XBLOCK * cfg.RBLOCK > 1 << 20:
            return f"XBLOCK*RBLOCK={cfg.XBLOCK * cfg.RBLOCK} elements per program is too large"
        whole_rows = cfg.persistent and cfg.split == 1 and cfg.RBLOCK >= next_pow2(group.rnumel)
        if not whole_rows and has_row_sort(group.nodes):
            return "a row sort needs each row in one block: a persistent config with RBLOCK >= rnumel, unsplit"
    members = group.placements()
    return why_not_options(cfg, KernelView(members, group.is_reduction, group.rnumel)) or why_not_columns(cfg, members)


def apply_plan(plan: FusionPlan, key: str, graph: SchedulerGraph) -> list[tuple[FusionGroup, LaunchConfig | None]]:
    """The plan's kernels as legal fusion groups in execution order, with their configs."""
    if plan.graph_key != key:
        raise PlanError(f"stale plan: it was made for graph {plan.graph_key}, this graph is {key}")
    by_id = {node_id(n): n for n in graph.nodes}
    seen: dict[str, int] = {}
    for k, kp in enumerate(plan.kernels):
        if not kp.nodes:
            raise PlanError(f"kernel {k} of the plan is empty")
        for nid in kp.nodes:
            if nid not in by_id:
                raise PlanError(f"kernel {k} names node {nid!r}, which this graph does not have")
            if nid in seen:
                raise PlanError(f"node {nid!r} is placed in kernels {seen[nid]} and {k}")
            seen[nid] = k
    missing = [nid for nid in by_id if nid not in seen]
    if missing:
        raise PlanError(f"the plan does not place nodes {', '.join(missing)}")
    out = []
    for k, kp in enumerate(plan.kernels):
        group = whole_group([by_id[n] for n in kp.nodes])
        if isinstance(group, str):
            raise PlanError(f"kernel {k} is illegal: {group}")
        if kp.config is not None:
            if group.is_extern:
                raise PlanError(f"kernel {k} is an ATen fallback and takes no launch config")
            why = check_config(kp.config, group)
            if why is not None:
                raise PlanError(f"kernel {k} has an impossible config: {why}")
        out.append((group, kp.config))
    config_of = {id(g): c for g, c in out}
    try:
        ordered = topological_groups([g for g, _ in out], graph)
    except RuntimeError:
        raise PlanError("the plan's kernels depend on each other in a cycle") from None
    return [(g, config_of[id(g)]) for g in ordered]


def plan_from_groups(key: str, groups: Sequence[FusionGroup], configs: Sequence[LaunchConfig | None],
                     strategy: str, decisions: dict[str, bool] | None = None,
                     conv_layout: str | None = None) -> FusionPlan:
    decisions = decisions or {}
    kernels = tuple(KernelPlan(tuple(node_id(n) for n in g.nodes), c) for g, c in zip(groups, configs))
    return FusionPlan(key, kernels, realize=tuple(sorted(n for n, v in decisions.items() if v)),
                      recompute=tuple(sorted(n for n, v in decisions.items() if not v)), strategy=strategy,
                      conv_layout=conv_layout)
