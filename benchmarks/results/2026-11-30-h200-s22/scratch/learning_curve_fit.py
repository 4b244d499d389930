"""Fit the learning curves of learning_curve.txt: held-out pairwise error 1 - pw against training graphs n,
as a power law err = k n^-c (no floor) and with a floor err = e_inf + k n^-c; graphs needed for pairwise 0.90.

    python benchmarks/results/2026-11-30-h200-s22/scratch/learning_curve_fit.py learning_curve.txt
"""
import re
import sys
from collections import defaultdict

import numpy as np
from scipy.optimize import curve_fit

pts = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    m = re.match(r"seed (\d+) frac \S+ rep \d+ graphs (\d+) .*pairwise (\S+) pairwise_sig", line)
    if m:
        pts[int(m.group(1))][int(m.group(2))].append(float(m.group(3)))
for seed, by in sorted(pts.items()):
    n = np.array(sorted(by), dtype=float)
    err = np.array([1 - np.mean(by[k]) for k in sorted(by)])
    print(f"seed {seed}: " + ", ".join(f"{int(a)} graphs {1 - e:.3f}" for a, e in zip(n, err)))
    c, logk = np.polyfit(np.log(n), np.log(err), 1)
    need = np.exp((np.log(0.10) - logk) / c)
    print(f"  power law, all points: err = {np.exp(logk):.3f} n^{c:.3f}; pairwise 0.90 at {need:.0f} graphs "
          f"({need / n[-1]:.0f}x the {int(n[-1])} now)")
    c2, logk2 = np.polyfit(np.log(n[-3:]), np.log(err[-3:]), 1)
    need2 = np.exp((np.log(0.10) - logk2) / c2)
    print(f"  power law, last 3 points: exponent {c2:.3f}; pairwise 0.90 at {need2:.0f} graphs ({need2 / n[-1]:.0f}x)")
    try:
        (e_inf, k, cc), _ = curve_fit(lambda x, e, k, c: e + k * x ** -c, n, err, p0=(0.1, 1.0, 0.5),
                                       bounds=([0, 0, 0], [1, 100, 5]))
        print(f"  with a floor: err = {e_inf:.3f} + {k:.3f} n^-{cc:.3f}: pairwise tends to {1 - e_inf:.3f}")
    except RuntimeError as exc:
        print("  with a floor: no fit", exc)
