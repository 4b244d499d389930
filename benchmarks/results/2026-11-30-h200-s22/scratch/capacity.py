"""A bigger pair classifier (issue 7): does more capacity lift the in-sample ranking (0.931 pairwise, 0.732
peak@1 with the shipped settings, in_sample.txt) and does the held-out ranking follow? Split seed 0, the 11
exports of c9b5c42; the shipped RANKER_PARAMS with the overrides below; fitted on all cores.

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s22/scratch/capacity.py
"""
from __future__ import annotations

import glob
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import make_pipeline

from benchmarks.costmodel_noise import load
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import FEATURE_NAMES, feature_matrix
from costmodel.model import FillEmptyColumns, measured_us, usable
from costmodel.rank import RANKER_PARAMS, PairRanker, training_pairs

ROOT = Path(__file__).resolve().parents[4]
COLS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret")
VARIANTS = {
    "1500 trees, 127 leaves, 5 per leaf": dict(max_iter=1500, max_leaf_nodes=127, min_samples_leaf=5),
}


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
    for name, params in VARIANTS.items():
        t0 = time.time()
        est = make_pipeline(FillEmptyColumns(), HistGradientBoostingClassifier(**{**RANKER_PARAMS, "random_state": 0,
                                                                                **params}))
        ranker = PairRanker(tuple(FEATURE_NAMES), est)
        est.fit(ranker.pair_rows(x[tr], pa, pb), lab)
        print(f"{name}: fitted in {time.time() - t0:.0f} s", flush=True)
        for side, ix in (("in sample", tr), ("held out", te)):
            g = [groups[i] for i in ix]
            m = metrics(y[ix], np.exp(-np.nan_to_num(ranker.scores(x[ix], g))), g)
            print(f"  {side}: {m.groups} groups: " + " ".join(f"{c} {getattr(m, c):.3f}" for c in COLS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
