"""The probes' common loop: variants built and checked against eager, then timed side by side in
interleaved rounds (benchmarks.run.time_interleaved).

Note: a variant that fails to build, to run or to match eager keeps a row with its error; it is
never timed and never stops the probe (trip_probe, store_probe).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from .cases import nbytes
from .rows_probe import as_list
from .run import close, copy_bandwidth, time_interleaved


class CheckedVariants:
    """Rows by variant name, and the callables that passed the check against eager."""

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.args = args
        self.expected = as_list(fn(*args))
        self.min_bytes = nbytes(args) + nbytes(self.expected)
        self.fns: dict[str, Callable[..., Any]] = {}
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, name: str, make: Callable[[], Callable[..., Any]], **extra: Any) -> None:
        self.rows[name] = {"variant": name, **extra}
        try:
            f = make()
            if not close(as_list(f(*self.args)), self.expected):
                raise AssertionError("differs from eager")
            self.fns[name] = f
        except Exception as e:  # noqa: BLE001 - a variant that fails to build or check is reported, not fatal
            self.rows[name]["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"

    def add_inductor_modes(self, fn: Callable[..., Any]) -> None:
        """Inductor default and max-autotune-no-cudagraphs, compiled afresh: every probe's reference."""
        import torch
        torch._dynamo.reset()
        self.add("inductor", lambda: torch.compile(fn))
        self.add("inductor max-autotune", lambda: torch.compile(fn, mode="max-autotune-no-cudagraphs"))

    def timed(self, reps: int, rounds: int, bw: float) -> list[dict[str, Any]]:
        """Every row; a checked variant's with its median µs, share of the copy bandwidth `bw` and
        each round's median."""
        for name, s in time_interleaved(self.fns, [self.args], reps, rounds).items():
            us = statistics.median(s) * 1e3
            self.rows[name].update(us=us, bw_share=self.min_bytes / (us * 1e-6) / bw,
                                   round_us=[statistics.median(s[i:i + reps]) * 1e3 for i in range(0, len(s), reps)])
        return list(self.rows.values())


def parser(doc: str, name: str, rounds: int, cases: Sequence[str]) -> argparse.ArgumentParser:
    """The probes' common options: --out (default benchmarks/results/NAME), --reps, --rounds, --cases."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--out", default=f"benchmarks/results/{name}")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--cases", nargs="*", default=list(cases))
    return p


def start(a: argparse.Namespace) -> tuple[Path, float, dict[str, Any]]:
    """The output folder (made), the copy bandwidth measured now, and the result's header."""
    import torch
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth("cuda", a.reps)
    return out, bw, {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                     "copy_bandwidth_TBps": bw / 1e12, "reps": a.reps, "rounds": a.rounds, "cases": {}}
