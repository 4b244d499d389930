"""The candidate space of a graph, as data, for the search.

Note: two levels. Realize-or-recompute choices are made on the ATen graph (multi-use values the
lowering keeps lazy or realizes); each assignment gives a lowered graph, whose fusion candidates
are the pairs of nodes sharing a buffer, each with its legality verdict. `plan_from_choices`
takes any subset of the legal pairs, in order, and merges greedily with a legality re-check
(a pair that became illegal after earlier merges is skipped), so every choice sequence yields a
legal plan. Config ranges per kernel kind bound the launch-config search.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..ir.values import ComputedBuffer, Pointwise
from ..lower import GraphLowering
from ..schedule.fusion import FusionGroup, can_fuse, candidate_pairs, merge, singleton, topological_groups
from ..schedule.heuristics import Heuristics
from ..schedule.scheduler import SchedulerGraph
from .apply import graph_key, node_id, plan_from_groups
from .plan import FusionPlan

# num_stages only pipelines loops: a pointwise or persistent kernel has none, and its machine code is
# the same at every num_stages (identical PTX at 1, 2 and 3 on sm_90), so it gets one value.
# Looped reductions get one value too: over 1452 measured pairs of looped configs at stage 1 and at
# 2-5, the rest equal, the time ratio's median is 1.000 and its p10-p90 0.995-1.005 (1.6% of pairs
# beyond ±2%), at every trip count: noise. Offering 1-3 would triple the looped candidates and spend
# the refine's steps on them, leaving the seed example's best row config (max-autotune's) out of
# reach (docs/defaults.md).
CONFIG_RANGES: dict[str, dict[str, tuple[int, ...]]] = {
    "pointwise": {"XBLOCK": (64, 128, 256, 512, 1024, 2048, 4096), "num_warps": (1, 2, 4, 8, 16),
                  "num_stages": (1,)},
    "persistent": {"XBLOCK": (1, 2, 4, 8, 16, 32, 64), "num_warps": (1, 2, 4, 8, 16, 32), "num_stages": (1,)},
    # split > 1: a split reduction (legal where codegen.split.why_not_split allows; check_config says)
    "looped": {"XBLOCK": (1, 2, 4, 8), "RBLOCK": (256, 512, 1024, 2048, 4096, 8192), "num_warps": (2, 4, 8, 16, 32),
               "num_stages": (1,), "split": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)},
    # reductions that walk memory with a stride (column sums): lanes along x, short r steps
    "outer": {"XBLOCK": (16, 32, 64, 128, 256), "RBLOCK": (4, 8, 16, 32, 64), "num_warps": (2, 4, 8, 16),
              "num_stages": (1,), "split": (1, 4, 8, 16, 32, 64)},
}


@dataclass(frozen=True)
class Candidate:
    a: str
    b: str
    legal: bool
    reason: str = ""


@dataclass
class CandidateSpace:
    graph_key: str
    realize_choices: tuple[str, ...]          # FX nodes whose multi-use value may be realized or recomputed
    decisions: dict[str, bool]                # the assignment this lowering used
    nodes: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    config_ranges: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=lambda: dict(CONFIG_RANGES))
    graph: Any = field(default=None, repr=False)

    @property
    def legal(self) -> list[Candidate]:
        return [c for c in self.candidates if c.legal]

    def plan_from_choices(self, chosen: Sequence[Candidate], strategy: str = "search") -> FusionPlan:
        graph: SchedulerGraph = self.graph
        by_id = {node_id(n): n for n in graph.nodes}
        owner: dict[str, FusionGroup] = {i: singleton(n) for i, n in by_id.items()}
        by_name = {n.name: owner[i] for i, n in by_id.items()}   # the group-level cycle check's view
        for c in chosen:
            if c.a not in owner or c.b not in owner:
                continue
            ga, gb = owner[c.a], owner[c.b]
            if ga is gb or can_fuse(ga, gb, graph, owner=by_name) is not None:
                continue
            m = merge(ga, gb, graph)
            for n in m.nodes:
                owner[node_id(n)] = m
                by_name[n.name] = m
        groups = list({id(g): g for g in owner.values()}.values())
        ordered = topological_groups(groups, graph)
        return plan_from_groups(self.graph_key, ordered, [None] * len(ordered), strategy, self.decisions)


def multi_use_values(gm: torch.fx.GraphModule, args: Sequence[Any], heuristics: Heuristics) -> list[str]:
    """FX nodes whose pointwise value has several uses: the realize-or-recompute choices."""
    from ..lower.graph import _count_uses
    low = GraphLowering(gm, args, heuristics, {}).run()
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or sum(_count_uses(u, n) for u in n.users) < 2:
            continue
        v = low.env.get(n)
        if isinstance(v, Pointwise) or (isinstance(v, ComputedBuffer) and not v.is_reduction and not v.is_scan):
            out.append(n.name)
    return out


def build_space(gm: torch.fx.GraphModule, args: Sequence[Any], heuristics: Heuristics | None = None,
                decisions: dict[str, bool] | None = None) -> CandidateSpace:
    """Deterministic for the same graph: nodes in lowering order, candidates in pair order."""
    heuristics = heuristics or Heuristics()
    decisions = dict(decisions or {})
    low = GraphLowering(gm, args, heuristics, decisions).run()
    graph = SchedulerGraph(low.buffers, low.outputs)
    groups = [singleton(n) for n in graph.nodes]
    cands = []
    for ga, gb in candidate_pairs(groups, heuristics):
        why = can_fuse(ga, gb, graph)
        cands.append(Candidate(node_id(ga.nodes[0]), node_id(gb.nodes[0]), why is None, why or ""))
    choices = tuple(sorted(set(multi_use_values(gm, args, heuristics))))
    return CandidateSpace(graph_key(gm, args), choices, decisions, tuple(node_id(n) for n in graph.nodes),
                          tuple(cands), graph=graph)
