"""Fit the learning curves of learning_curve.txt: each held-out ranking metric's shortfall 1 - metric against
training graphs n, as a power law k n^-c (all points, and the last three), and with a floor e_inf + k n^-c; the
graphs at which the power law reaches issue 7's target.

    python benchmarks/results/2026-11-30-h200-s22/scratch/learning_curve_fit.py learning_curve.txt
"""
import re
import sys
from collections import defaultdict

import numpy as np
from scipy.optimize import curve_fit

TARGETS = {"pairwise": 0.90, "peak1": 0.90, "peak5": 0.96}
pts = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
for line in open(sys.argv[1]):
    m = re.match(r"seed (\d+) frac \S+ rep \d+ graphs (\d+) .*?: (.*)$", line)
    if m:
        vals = dict(zip(*[iter(m.group(3).split())] * 2))
        for k in TARGETS:
            pts[int(m.group(1))][k][int(m.group(2))].append(float(vals[k]))
for seed, metrics in sorted(pts.items()):
    for name, by in metrics.items():
        n = np.array(sorted(by), dtype=float)
        err = np.array([1 - np.mean(by[k]) for k in sorted(by)])
        goal = 1 - TARGETS[name]
        print(f"seed {seed} {name}: " + ", ".join(f"{int(a)} graphs {1 - e:.3f}" for a, e in zip(n, err)))
        for label, sl in (("all points", slice(None)), ("last 3", slice(-3, None))):
            c, logk = np.polyfit(np.log(n[sl]), np.log(err[sl]), 1)
            need = np.exp((np.log(goal) - logk) / c) if c < 0 else float("inf")
            print(f"  power law, {label}: shortfall = {np.exp(logk):.3f} n^{c:.3f}; {TARGETS[name]} at {need:.0f} graphs "
                  f"({need / n[-1]:.0f}x the {int(n[-1])} now)")
        try:
            (e_inf, k, cc), _ = curve_fit(lambda x, e, k, c: e + k * x ** -c, n, err, p0=(0.1, 1.0, 0.5),
                                           bounds=([0, 0, 0], [1, 100, 5]))
            print(f"  with a floor: shortfall = {e_inf:.3f} + {k:.3f} n^-{cc:.3f}: tends to {1 - e_inf:.3f}")
        except RuntimeError as exc:
            print("  with a floor: no fit:", exc)
