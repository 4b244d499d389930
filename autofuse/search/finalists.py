"""The end of a graph's search: verify the best plans against eager, time them end to end, pick.

Note: estimates (sums of kernel times) rank the trials; the winner is decided on whole-plan times,
measured in interleaved rounds so that drift hits every candidate alike. A challenger replaces
the incumbent (the default plan) only if it is faster by more than the run-to-run spread of
either; a plan whose outputs differ from eager's is never a winner.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..compiler import compile_graph
from ..measure.timing import Benchmarker
from ..measure.verify import compare
from ..options import CompileOptions
from ..plan.plan import FusionPlan


@dataclass
class Finalist:
    name: str                      # "inductor", "tvm", "none", "tuned #k"
    plan: FusionPlan
    est_us: float = math.inf
    kernel_records: list[dict[str, Any]] = field(default_factory=list)
    program: Any = None
    error: str | None = None       # why it cannot win (wrong values, failed to build)
    rounds_us: list[float] = field(default_factory=list)
    measured: bool = True

    @property
    def median_us(self) -> float:
        return statistics.median(self.rounds_us) if self.rounds_us else math.inf

    @property
    def spread_us(self) -> float:
        return (max(self.rounds_us) - min(self.rounds_us)) if len(self.rounds_us) > 1 else 0.0

    @property
    def num_kernels(self) -> int:
        return sum(1 for k in self.program.kernels if k.kind != "fallback") if self.program is not None else len(self.plan.kernels)


def verify(f: Finalist, gm: torch.fx.GraphModule, args: Sequence[Any], expected: list[Any], options: CompileOptions) -> None:
    """Build f's plan with poisoned buffers and compare its outputs with eager's; keep the plan's
    program built without poison for timing (poisoning fills every fresh buffer on each call)."""
    try:
        opts = options.with_(plan=f.plan, strict=True, use_db=False, recorder=None)
        checked = compile_graph(gm, args, opts.with_(poison=True)).program
        f.error = compare(checked(list(args)), expected)
        if f.error is None:
            f.program = compile_graph(gm, args, opts.with_(poison=False)).program
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a plan that does not build cannot win
        f.error = f"{type(e).__name__}: {e}"


def time_rounds(finalists: list[Finalist], args: Sequence[Any], bench: Benchmarker, rounds: int) -> None:
    """Whole-plan times, the candidates interleaved within each round."""
    for _ in range(rounds if bench.measures else 1):
        for f in finalists:
            if f.error is not None or f.program is None:
                continue
            prog = f.program
            t = bench.time(lambda: prog(list(args)), {"kind": "plan", "kernels": f.kernel_records,
                                                      "plan": f.plan.to_json()})
            f.rounds_us.append(t.median_us)
            f.measured = t.measured


def pick(incumbent: Finalist, challengers: list[Finalist]) -> tuple[Finalist, str]:
    """The winner and why: the fastest verified plan, if it beats the incumbent beyond the noise."""
    ok = [f for f in [incumbent, *challengers] if f.error is None and f.rounds_us]
    if not ok:
        return incumbent, "no plan could be verified"
    best = min(ok, key=lambda f: (f.median_us, f is not incumbent))
    if best is incumbent:
        return incumbent, "the default plan was fastest"
    if incumbent.error is not None or not incumbent.rounds_us:
        return best, f"the default plan failed ({incumbent.error})"
    margin = incumbent.median_us - best.median_us
    noise = max(best.spread_us, incumbent.spread_us)
    if best.measured and margin <= noise:
        return incumbent, (f"{best.name} was faster by {margin:.2f} us, within the run-to-run spread "
                           f"({noise:.2f} us): kept the default")
    return best, f"{best.name} beats the default by {margin:.2f} us (spread {noise:.2f} us)"
