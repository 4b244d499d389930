"""Learning curve of the pair ranker (issue 7): held-out ranking metrics against the share of training
graphs, split seeds 0 and 1, from the 11 exports of c9b5c42 (output: learning_curve.txt; fitted by
learning_curve_fit.py). The ranker alone orders a group (costmodel_variants' note), so the metrics here
are the ranker's; `predicted` = exp(-score) only carries its order. A fraction below 1 keeps that share
of the training graphs, drawn at random (--reps draws); the held-out graphs stay the split's.

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s22/scratch/learning_curve.py [--seeds 0 1]
"""
from __future__ import annotations

import argparse
import glob
import sys
import time
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
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0])
    p.add_argument("--reps", type=int, default=2, help="graph subsamples per fraction below 1")
    p.add_argument("--cache", default="/tmp/lc_x.npy")
    a = p.parse_args()
    paths = sorted(glob.glob(str(ROOT / "costmodel" / "data" / "*.jsonl.gz")))
    paths = [q for q in paths if "s22" not in q]  # the 11 exports of c9b5c42 (the run predates s22's data)
    rows = usable([r for path in paths for r in load(path) if str(r["device"]) == "cuda:NVIDIA H200:sm90"])
    t0 = time.time()
    try:
        x = np.load(a.cache)
        assert x.shape[0] == len(rows)
    except (OSError, AssertionError):
        x = feature_matrix([r["features"] for r in rows], compile=False)
        np.save(a.cache, x)
    print(f"{len(rows)} rows from {len(paths)} exports, features {x.shape} in {time.time() - t0:.0f} s", flush=True)
    y = measured_us(rows)
    log_us = np.log(y)
    groups = [str(r["features"].get("group")) for r in rows]
    graph = np.array([str(r["features"].get("graph")) for r in rows])
    index = {id(r): i for i, r in enumerate(rows)}
    for seed in a.seeds:
        train, test = split_by_graph(rows, 0.25, seed)
        tr = np.array([index[id(r)] for r in train])
        te = np.array([index[id(r)] for r in test])
        te_groups = [groups[i] for i in te]
        train_graphs = sorted(set(graph[tr]))
        print(f"seed {seed}: {len(train_graphs)} training graphs, {len(tr)} rows; held out "
              f"{len(set(graph[te]))} graphs, {len(te)} rows", flush=True)
        for frac in a.fractions:
            for rep in range(1 if frac >= 1 else a.reps):
                rng = np.random.default_rng(100 * seed + rep)
                k = max(2, round(frac * len(train_graphs)))
                keep = set(rng.choice(train_graphs, k, replace=False)) if frac < 1 else set(train_graphs)
                sx = tr[np.isin(graph[tr], list(keep))]
                sub_groups = [groups[i] for i in sx]
                pa, pb, lab = training_pairs(log_us[sx], sub_groups)
                t1 = time.time()
                ranker = fit_pairs(x[sx], pa, pb, lab, None, seed=0)
                score = ranker.scores(x[te], te_groups)
                m = metrics(y[te], np.exp(-np.nan_to_num(score)), te_groups)
                print(f"seed {seed} frac {frac:.3f} rep {rep} graphs {k} rows {len(sx)} pairs {len(pa)} "
                      f"fit {time.time() - t1:.0f}s: " + " ".join(f"{c} {getattr(m, c):.3f}" for c in COLS),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
