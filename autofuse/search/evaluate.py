"""A candidate grouping's estimated time: build it, run it once, tune each kernel's config in place.

Note: the estimate is the sum of the kernels' best times plus the ATen fallbacks' times — the
structure that makes the search cheap: a kernel already tuned (in this tune, or measured in the
tuning DB) costs nothing the next time a plan contains it. End-to-end timing is for the finalists.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import torch

from ..compiler import ProgramBuilder, ScheduledGraph, schedule
from ..options import CompileOptions
from ..plan.apply import node_id, plan_from_groups
from ..plan.plan import FusionPlan, KernelPlan
from ..runtime.precompile import precompile
from ..runtime.program import ExternCall, KernelLaunch
from .kernels import KernelChoice, KernelTuner, PastDeadline
from .records import group_key, kernel_record


@dataclass(frozen=True)
class PlanEval:
    plan: FusionPlan               # the grouping with each kernel's best config
    est_us: float                  # sum of kernel and fallback times (inf if a kernel has no working config)
    kernels: tuple[KernelChoice, ...]
    extern_us: float = 0.0
    error: str | None = None

    @property
    def num_kernels(self) -> int:
        return len(self.plan.kernels)


def without_configs(plan: FusionPlan) -> FusionPlan:
    return replace(plan, kernels=tuple(KernelPlan(k.nodes, None) for k in plan.kernels))


def grouping_key(plan: FusionPlan) -> tuple:
    return (tuple(sorted(tuple(sorted(k.nodes)) for k in plan.kernels)), plan.realize, plan.recompute)


def runner_up_plans(ev: PlanEval, limit: int) -> list[tuple[str, FusionPlan]]:
    """(name, plan): ev's plan with one kernel's config swapped for one of its close runners-up
    (`KernelChoice.close`), the longest kernels first, at most `limit`. Why: the kernel tuner tells
    configs within a percent apart by one measurement each; timed end to end with the finalists, the
    better of a near tie is found (rmsnorm's max-autotune config against its neighbours: 129.12 to
    129.46 µs on the H200)."""
    out: list[tuple[str, FusionPlan]] = []
    for choice in sorted(ev.kernels, key=lambda c: -c.median_us):
        nodes = tuple(choice.record.get("nodes", ()))
        for cfg in choice.close:
            kernels = tuple(replace(kp, config=cfg) if kp.nodes == nodes else kp for kp in ev.plan.kernels)
            if kernels != ev.plan.kernels:
                out.append((f"runner-up {cfg} for {'+'.join(nodes)[:40]}", replace(ev.plan, kernels=kernels)))
    return out[:limit]


class PlanEvaluator:
    """Estimates plans of one graph; caches by grouping."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], tuner: KernelTuner,
                 options: CompileOptions | None = None, time_externs: bool = True) -> None:
        self.gm, self.args, self.tuner = gm, list(args), tuner  # copies of inputs the graph updates: `unshared_mutated_inputs`
        self.time_externs = time_externs  # False: fallbacks run but add nothing to the estimate
        self.options = (options or CompileOptions()).with_(use_db=False, strict=True, poison=False, recorder=None)
        self.cache: dict[tuple, PlanEval] = {}
        self.extern_times: dict[str, float] = {}

    def evaluate(self, plan: FusionPlan, scheduled: ScheduledGraph | None = None) -> PlanEval:
        """plan's estimate; `scheduled`: the graph already lowered and grouped as plan groups it, with
        default configs (the compile-time autotune has it), so it is not lowered again."""
        key = grouping_key(plan)
        if key not in self.cache:
            try:
                self.cache[key] = self._evaluate(without_configs(plan), scheduled)
            except (KeyboardInterrupt, PastDeadline):
                raise
            except Exception as e:  # noqa: BLE001 - a plan that cannot be built scores infinity
                self.cache[key] = PlanEval(plan, math.inf, (), 0.0, f"{type(e).__name__}: {e}")
        return self.cache[key]

    def _build(self, plan: FusionPlan, scheduled: ScheduledGraph | None = None
               ) -> tuple[ProgramBuilder, Any, list, dict[str, bool]]:
        """The plan's builder, artifacts, an environment holding the inputs, and its realize decisions."""
        opts = self.options.with_(plan=plan)
        sched = scheduled or schedule(self.gm, self.args, opts)
        builder = ProgramBuilder(sched.lowering, sched.graph, sched.groups, opts, sched.configs)
        arts = builder.build(sched.log)
        return builder, arts, arts.program.new_env(self.args), sched.decisions

    def _evaluate(self, plan: FusionPlan, scheduled: ScheduledGraph | None = None) -> PlanEval:
        builder, arts, env, decisions = self._build(plan, scheduled)
        prog = arts.program
        precompile([s for s in prog.steps if isinstance(s, KernelLaunch)])  # the defaults on host threads, not one by one
        launch_groups = [gi for gi, g in enumerate(builder.groups) if not g.is_extern]
        infos = [k for k in arts.kernels if k.kind != "fallback"]
        configs: dict[int, Any] = {}
        choices: list[KernelChoice] = []
        extern_us = 0.0
        k = 0
        for step in prog.steps:
            if isinstance(step, KernelLaunch):
                gi = launch_groups[k]
                choice = self.tuner.tune(builder, gi, step, infos[k], env)
                configs[gi] = choice.config
                choices.append(choice)
                k += 1
            elif isinstance(step, ExternCall) and self.time_externs:
                extern_us += self._time_extern(step, env)
            else:
                step.run(env)
        final = plan_from_groups(plan.graph_key, builder.groups, [configs.get(i) for i in range(len(builder.groups))],
                                 "search", decisions)
        est = sum(c.median_us for c in choices) + extern_us
        return PlanEval(final, est, tuple(choices), extern_us)

    def records(self, plan: FusionPlan) -> list[dict[str, Any]]:
        """Kernel records of the plan exactly as given (its configs kept): what a fake or predicting
        benchmarker needs to time the whole plan."""
        builder, arts, env, _ = self._build(plan)
        prog = arts.program
        infos = iter([k for k in arts.kernels if k.kind != "fallback"])
        groups = iter([g for g in builder.groups if not g.is_extern])
        out = []
        for step in prog.steps:
            if isinstance(step, KernelLaunch):
                ids = [node_id(n) for n in next(groups).nodes]
                rec = kernel_record(next(infos), step, env, self.tuner.graph, "", self.tuner.traits, ids)
                rec["group"] = group_key(rec)
                out.append(rec)
            step.run(env)
        return out

    def _time_extern(self, step: ExternCall, env: list) -> float:
        """Run the fallback (its outputs are needed) and time it once per op and signature."""
        step.run(env)
        key = f"{step.name}:{step.out_layouts!r}"
        if key not in self.extern_times:
            t = self.tuner.bench.time(lambda: step.run(env), {"kind": "extern", "op": step.name})
            self.extern_times[key] = t.median_us
        return self.extern_times[key]


def unshared_mutated_inputs(gm: torch.fx.GraphModule, args: list) -> list:
    """args with the inputs that the graph writes in place (running statistics) cloned: an evaluation
    runs the program many times, and the user's buffers must be updated once, by the real call."""
    mutated: set[int] = set()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    for n in gm.graph.nodes:
        schema = getattr(n.target, "_schema", None)
        if n.op == "call_function" and schema is not None and schema.is_mutable and n.args:
            target = n.args[0]
            if isinstance(target, torch.fx.Node) and target in index:
                mutated.add(index[target])
    return [a.clone() if i in mutated and isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]
