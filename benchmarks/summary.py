"""Ratios and geometric means of a benchmark results.json (what the README quotes).

    python3 -m benchmarks.summary benchmarks/results/2026-11-30-h200-suite/results.json [--leave-out CASE ...]

--leave-out drops cases from the means (a case whose readings swung within the run, for example).
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Sequence


def summary(results: dict, variant: str = "autofuse_tuned", leave_out: Sequence[str] = ()) -> str:
    lines, ratios, big = [], [], []
    for c in results["cases"]:
        if c["case"] in leave_out:
            continue
        v = c["variants"]
        t, ind, mx = v.get(variant, {}).get("ms"), v["inductor"].get("ms"), v["inductor_max_autotune"].get("ms")
        if not (t and ind):
            continue
        ratios.append(ind / t)
        if c["min_bytes"] > 100e6:
            big.append(ind / t)
        lines.append(f"{c['case']:40s} vs inductor {ind / t:.2f}x  vs max-autotune {mx / t if mx else float('nan'):.2f}x  "
                     f"{100 * v[variant]['bw_share']:.0f}% of copy bandwidth")

    def gm(xs: list[float]) -> float:
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    lines.append(f"geometric mean vs inductor: {gm(ratios):.2f}x over {len(ratios)} cases, "
                 f"{gm(big):.2f}x over the {len(big)} cases above 100 MB")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.summary", description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("--leave-out", nargs="*", default=[], metavar="CASE", help="cases left out of the means")
    a = p.parse_args(argv)
    with open(a.results) as f:
        print(summary(json.load(f), leave_out=a.leave_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
