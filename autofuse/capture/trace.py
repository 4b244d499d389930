"""Direct tracing of a function into a functional ATen graph, without Dynamo.

Used by tests and the random-graph generator: make_fx (+ functionalization) with the same
decomposition table the Dynamo backend hands to AOTAutograd, so the compiler sees the same ops.
It traces on fake tensors, as Dynamo does: an op whose eager code reads a value (one_hot checks its
indices' range with `.item()`) traces to its computation instead of failing; tensors the function
closes over (a module's parameters) enter the graph as constants.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..options import CompileOptions
from .backend import CompiledGraph
from .decompositions import decomposition_table


def trace_aten(fn: Callable[..., Any], args: Sequence[Any]) -> torch.fx.GraphModule:
    functional = torch.func.functionalize(fn, remove="mutations")
    with torch.no_grad():
        return make_fx(functional, decomposition_table=decomposition_table(), tracing_mode="fake",
                       _allow_non_fake_inputs=True)(*args)


def compile_traced(fn: Callable[..., Any], args: Sequence[Any], options: CompileOptions | None = None) -> Callable[..., Any]:
    """Compile fn for args via make_fx; returns a callable taking the same positional tensors."""
    gm = trace_aten(fn, args)
    compiled = CompiledGraph(gm, options or CompileOptions(strict=True, use_db=False), "traced")

    def run(*call_args: Any) -> Any:
        outs = compiled(list(call_args))
        return outs

    run.graph = gm  # type: ignore[attr-defined]
    run.compiled = compiled  # type: ignore[attr-defined]
    return run
