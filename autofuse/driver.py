"""The driver: which plan a captured graph is built from, then its compiled program.

Note: capture hands each ATen graph and its inputs here; the driver decides where the plan comes
from — a search (`options.tuner`), a plan given by the caller, the tuning DB (with `on_miss`
deciding what a miss does), or the strategy, whose reduction configs are measured at compile time
on the GPU (`options.autotune`, search/autotune.py) — and compiles the graph with it. A stored plan that
is not legal for this graph is rejected with a warning and the default plan is used instead.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Sequence

import torch.fx

from .compiler import CompiledArtifacts, compile_graph
from .options import CompileOptions
from .plan.plan import PlanError
from .runtime.reuse import Lookup, open_db, stored_plan

AUTOTUNE_ENV = "AUTOFUSE_AUTOTUNE"  # "0": no compile-time autotuning in this process, whatever the options say


def build(gm: torch.fx.GraphModule, args: Sequence[Any], label: str,
          options: CompileOptions) -> tuple[CompiledArtifacts, Lookup | None]:
    """The graph compiled from the plan it gets, and the tuning-DB lookup made for it (if any)."""
    if options.tuner is not None:
        plan = options.tuner(gm, args, label)
        return compile_graph(gm, args, options.with_(tuner=None, **({"plan": plan} if plan else {}))), None
    if options.plan is not None:
        return compile_graph(gm, args, options), None
    lookup = None
    if options.use_db:
        plan, lookup = stored_plan(gm, args, options)
        if plan is None and options.on_miss == "tune" and not lookup.detail.startswith("tuning DB not usable"):
            plan = tune_on_miss(gm, args, label, options)
        artifacts = _from_plan(gm, args, options, plan, "tuning DB", f"the stored plan for graph {lookup.graph_hash}")
        if artifacts is not None:
            return artifacts, lookup
    if options.autotune and os.environ.get(AUTOTUNE_ENV, "1") != "0":
        from .search.autotune import autotuned
        artifacts = autotuned(gm, args, options)
        if artifacts is not None:
            return artifacts, lookup
    return compile_graph(gm, args, options), lookup


def _from_plan(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions, plan: Any, source: str,
               what: str) -> CompiledArtifacts | None:
    """The graph compiled from plan (marked with its source); None without a plan, or with a warning
    when the plan is not legal for this graph (the caller then uses the default plan)."""
    if plan is None:
        return None
    try:
        artifacts = compile_graph(gm, args, options.with_(plan=plan))
    except PlanError as e:
        warnings.warn(f"autofuse: {what} is not legal here ({e}); using the default plan")
        return None
    artifacts.source = source
    return artifacts


def tune_on_miss(gm: torch.fx.GraphModule, args: Sequence[Any], label: str, options: CompileOptions) -> Any:
    """on_miss="tune": search this graph now (default settings), store and use the winner."""
    from .search.graph_tuner import GraphTuner, TuneSettings
    settings = TuneSettings(db=options.db, heuristics=options.heuristics, progress=options.verbose,
                            compare_torch_compile=False)
    return GraphTuner(open_db(options.db), settings).run(gm, args, label).plan
