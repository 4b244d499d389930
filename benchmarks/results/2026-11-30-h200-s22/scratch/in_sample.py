"""In-sample against held-out ranking metrics of the shipped ranker recipe (split seed 0, the 11 exports of
c9b5c42): is the held-out shortfall bias (the training groups ranked no better) or variance (the training
groups ranked far better than unseen graphs')?

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s22/scratch/in_sample.py
"""
from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np

from benchmarks.costmodel_noise import load
from benchmarks.costmodel_variants import fit_pairs
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import feature_matrix
from costmodel.model import measured_us, usable
from costmodel.rank import training_pairs

ROOT = Path(__file__).resolve().parents[4] if "results" in __file__ else Path(".")
COLS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret")


def main() -> int:
    paths = [q for q in sorted(glob.glob(str(ROOT / "costmodel" / "data" / "*.jsonl.gz"))) if "s22" not in q]
    rows = usable([r for path in paths for r in load(path) if str(r["device"]) == "cuda:NVIDIA H200:sm90"])
    x = feature_matrix([r["features"] for r in rows], compile=False)
    y = measured_us(rows)
    groups = [str(r["features"].get("group")) for r in rows]
    index = {id(r): i for i, r in enumerate(rows)}
    train, test = split_by_graph(rows, 0.25, 0)
    tr = np.array([index[id(r)] for r in train])
    te = np.array([index[id(r)] for r in test])
    pa, pb, lab = training_pairs(np.log(y[tr]), [groups[i] for i in tr])
    ranker = fit_pairs(x[tr], pa, pb, lab, None, seed=0)
    for name, ix in (("training graphs (in sample)", tr), ("held-out graphs", te)):
        g = [groups[i] for i in ix]
        m = metrics(y[ix], np.exp(-np.nan_to_num(ranker.scores(x[ix], g))), g)
        print(f"{name}: {m.groups} groups: " + " ".join(f"{c} {getattr(m, c):.3f}" for c in COLS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
