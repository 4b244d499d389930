"""The shipped model's held-out ranking in TenSet's terms (issue 7 cites TenSet's 0.88 / 0.88 / 0.95).

TenSet's "top-k score" (tlc-pack/tenset, scripts/eval_model.py) is a latency ratio: the measured best
latency over the best measured latency among the model's k first picks, summed over tasks with weights.
Issue 7's peak@1 / peak@5 are hit rates (the pick is the measured best within 1% / among the measured
top 5). This prints both on retrain's held-out set (11 exports of c9b5c42, split seed 0), with two
weightings of the top-k score: each group alike (mean of ratios) and by time (sum of best / sum of picks).

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s22/scratch/tenset_scores.py
"""
from __future__ import annotations

import glob
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.costmodel_noise import load
from costmodel.evaluate import metrics, split_by_graph
from costmodel.model import CostModel, measured_us, usable
from costmodel.predict import pretrained_path

ROOT = Path(__file__).resolve().parents[4]
paths = [q for q in sorted(glob.glob(str(ROOT / "costmodel" / "data" / "*.jsonl.gz"))) if "s22" not in q]
rows = usable([r for path in paths for r in load(path) if str(r["device"]) == "cuda:NVIDIA H200:sm90"])
_, test = split_by_graph(rows, 0.25, 0)
model = CostModel.from_bytes(pretrained_path("cuda:NVIDIA H200:sm90").read_bytes())
m = measured_us(test)
p = np.asarray(model.predict_us([r["features"] for r in test]))
groups = [str(r["features"].get("group")) for r in test]
print(f"model {model.version}; held out {len(test)} kernels")
print("issue 7's definitions:", {k: round(v, 3) for k, v in metrics(m, p, groups).to_json().items()
                                 if k in ("pairwise", "peak1", "peak5", "regret")})
by = defaultdict(list)
for i, g in enumerate(groups):
    by[g].append(i)
multi = [np.array(ix) for ix in by.values() if len(ix) >= 2]
for k in (1, 5):
    ratios, best_sum, pick_sum = [], 0.0, 0.0
    for ix in multi:
        order = ix[np.argsort(p[ix], kind="stable")]
        best, pick = m[ix].min(), m[order[:k]].min()
        ratios.append(best / pick)
        best_sum += best
        pick_sum += pick
    print(f"TenSet top-{k} score: groups alike {np.mean(ratios):.3f}, by time {best_sum / pick_sum:.3f} ({len(multi)} groups)")
# pairwise over every pair of different measured times, ties included (TenSet counts all pairs)
ok = tot = 0
for ix in multi:
    a, b = np.triu_indices(len(ix), 1)
    a, b = ix[a], ix[b]
    keep = m[a] != m[b]
    ok += int(np.sum((p[a] < p[b])[keep] == (m[a] < m[b])[keep]))
    tot += int(keep.sum())
print(f"pairwise over all pairs, no tie band: {ok / tot:.3f} ({tot} pairs)")
