"""Top-focused pair weights for the ranker (issue 7), split seeds 0 and 1, all 11 exports of c9b5c42:
the shipped recipe against LambdaRank-style weights |1/log2(2 + rank_a) - 1/log2(2 + rank_b)| (rank =
measured place in the group, 0 = best; normalised to mean 1) and against "top 5 weighted 3".

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s22/scratch/top_weights.py [--variants ...]
"""
from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from benchmarks.costmodel_noise import load
from benchmarks.costmodel_variants import fit_pairs
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import feature_matrix
from costmodel.model import measured_us, usable
from costmodel.rank import group_indices, training_pairs

ROOT = Path(__file__).resolve().parents[4] if "results" in __file__ else Path(".")
COLS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret")


def ranks(log_us: np.ndarray, groups: list[str]) -> np.ndarray:
    r = np.zeros(len(log_us))
    for ix in group_indices(groups):
        r[ix] = rankdata(log_us[ix], method="min") - 1
    return r


def weights(name: str, r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    if name == "shipped":
        return None
    if name == "lambda":
        w = np.abs(1 / np.log2(2 + r[a]) - 1 / np.log2(2 + r[b]))
    elif name == "top5x3":
        w = 1 + 2.0 * (np.minimum(r[a], r[b]) < 5)
    else:
        raise ValueError(name)
    return w / w.mean()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--variants", nargs="+", default=["lambda", "top5x3"])
    p.add_argument("--cache", default="/tmp/lc_x.npy")
    a = p.parse_args()
    paths = sorted(glob.glob(str(ROOT / "costmodel" / "data" / "*.jsonl.gz")))
    paths = [q for q in paths if "s22" not in q]  # the 11 exports of c9b5c42
    rows = usable([r for path in paths for r in load(path) if str(r["device"]) == "cuda:NVIDIA H200:sm90"])
    try:
        x = np.load(a.cache)
        assert x.shape[0] == len(rows)
    except (OSError, AssertionError):
        x = feature_matrix([r["features"] for r in rows], compile=False)
        np.save(a.cache, x)
    y = measured_us(rows)
    log_us = np.log(y)
    groups = [str(r["features"].get("group")) for r in rows]
    index = {id(r): i for i, r in enumerate(rows)}
    for seed in a.seeds:
        train, test = split_by_graph(rows, 0.25, seed)
        tr = np.array([index[id(r)] for r in train])
        te = np.array([index[id(r)] for r in test])
        te_groups = [groups[i] for i in te]
        tr_groups = [groups[i] for i in tr]
        pa, pb, lab = training_pairs(log_us[tr], tr_groups)
        r = ranks(log_us[tr], tr_groups)
        for name in a.variants:
            t1 = time.time()
            ranker = fit_pairs(x[tr], pa, pb, lab, weights(name, r, pa, pb), seed=0)
            score = ranker.scores(x[te], te_groups)
            m = metrics(y[te], np.exp(-np.nan_to_num(score)), te_groups)
            print(f"seed {seed} {name} pairs {len(pa)} fit {time.time() - t1:.0f}s: "
                  + " ".join(f"{c} {getattr(m, c):.3f}" for c in COLS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
