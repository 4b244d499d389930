"""The end of a graph's search: verify the best plans against eager, time them end to end, pick.

Note: estimates (sums of kernel times) rank the trials; the winner is decided on whole-plan times,
measured in interleaved rounds (each round in a rotated order) so that drift hits every candidate
alike. A challenger replaces the incumbent (the default plan) if it is faster by more than the
run-to-run spread of either, or, when the margin is within that spread, if it is faster in every
one of at least CONFIRM_MIN_ROUNDS paired rounds (the tuner times the two again for that): paired
rounds cancel the drift that the spread includes, and a noise-only difference wins all 9 with
probability 1/512. Why: a 0.2% gain (rmsnorm at max-autotune's config: 129.18 against our
default's 129.50 µs) sits inside a 3-round spread, which alone would keep the default.
A plan whose outputs differ from eager's is never a winner.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ..compiler import compile_graph
from ..measure.timing import Benchmarker, rotated
from ..measure.verify import check_outputs
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


def verify(f: Finalist, gm: torch.fx.GraphModule, args: Sequence[Any], expected: list[Any], options: CompileOptions,
           reference: Callable[[], Any] | None = None) -> None:
    """Build f's plan with poisoned buffers and compare its outputs with eager's (and, where they
    differ beyond the dtype's tolerance, with `reference()`, the graph in float64: `check_outputs`);
    keep the plan's program built without poison for timing (poisoning fills every fresh buffer on
    each call)."""
    try:
        opts = options.with_(plan=f.plan, strict=True, use_db=False, recorder=None)
        checked = compile_graph(gm, args, opts.with_(poison=True)).program
        f.error = check_outputs(checked(list(args)), expected, reference)
        if f.error is None:
            f.program = compile_graph(gm, args, opts.with_(poison=False)).program
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a plan that does not build cannot win
        f.error = f"{type(e).__name__}: {e}"


CONFIRM_MIN_ROUNDS = 9


def time_rounds(finalists: list[Finalist], args: Sequence[Any], bench: Benchmarker, rounds: int) -> None:
    """Whole-plan times, the candidates interleaved within each round, each round starting one
    candidate later (no candidate always runs first or after the same neighbour)."""
    for r in range(rounds if bench.measures else 1):
        for f in rotated(finalists, r):
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
        for f in sorted((f for f in ok if f is not incumbent and f.median_us < incumbent.median_us),
                        key=lambda f: f.median_us):
            wins, paired = paired_wins(f, incumbent)
            if paired >= CONFIRM_MIN_ROUNDS and wins == paired:
                return f, (f"{f.name} beats the default by {incumbent.median_us - f.median_us:.2f} us, within "
                           f"the spread but faster in all {paired} paired rounds")
        wins, paired = paired_wins(best, incumbent)
        return incumbent, (f"{best.name} was faster by {margin:.2f} us, within the run-to-run spread "
                           f"({noise:.2f} us), in {wins} of {paired} paired rounds: kept the default")
    return best, f"{best.name} beats the default by {margin:.2f} us (spread {noise:.2f} us)"


def paired_wins(challenger: Finalist, incumbent: Finalist) -> tuple[int, int]:
    """(rounds the challenger was faster in, rounds both were timed in): round i of each was timed
    in the same interleaved round."""
    pairs = list(zip(challenger.rounds_us, incumbent.rounds_us))
    return sum(c < i for c, i in pairs), len(pairs)


def needs_confirmation(incumbent: Finalist, challengers: list[Finalist]) -> Finalist | None:
    """The challenger that would win but for the spread, when the rounds so far are too few to pair."""
    winner, _ = pick(incumbent, challengers)
    if winner is not incumbent or incumbent.error is not None or not incumbent.rounds_us:
        return None
    ok = [f for f in challengers if f.error is None and f.rounds_us and f.measured]
    best = min(ok, key=lambda f: f.median_us, default=None)
    if best is None or best.median_us >= incumbent.median_us:
        return None
    return best if paired_wins(best, incumbent)[1] < CONFIRM_MIN_ROUNDS else None
