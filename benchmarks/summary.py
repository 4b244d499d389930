"""Ratios and geometric means of a benchmark results.json (what the README quotes).

    python3 -m benchmarks.summary benchmarks/results/2026-11-29-h200-tuned/results.json
"""
from __future__ import annotations

import json
import math
import sys


def summary(results: dict, variant: str = "autofuse_tuned") -> str:
    lines, ratios, big = [], [], []
    for c in results["cases"]:
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


if __name__ == "__main__":
    print(summary(json.load(open(sys.argv[1]))))
