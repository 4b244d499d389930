"""Scratch (session 16): do compiled sm_90 features (registers, spills, occupancy) help the pair
ranker on the new-codegen data? Held-out graphs of the three session-15 exports (split seeds 0-2),
trained on their other graphs plus the older exports; the ranker with and without the compiled
columns (NaN for rows without them). Needs the compile cache filled for the session-15 exports
(costmodel.features.precompile). Run from the repository root."""
import sys
import numpy as np
from benchmarks.costmodel_noise import load
from benchmarks.costmodel_variants import extra_for, fit_pairs
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import COMPILED_NAMES, FEATURE_NAMES, feature_matrix
from costmodel.model import REGRESSOR_NAMES, columns, fit_matrix, measured_us, predict_matrix, usable
from costmodel.rank import order_within_groups, training_pairs

NEW = [f"costmodel/data/h200-2026-11-30-{s}.jsonl.gz" for s in ("s15", "s15b", "s15c")]
OLD = [f"costmodel/data/h200-2026-11-{s}.jsonl.gz" for s in ("29", "30-s1", "30-s2")]
COLS = ("pairwise", "peak1", "peak1_tol", "peak5", "regret")

rows = usable([r for p in NEW for r in load(p)])
extra = usable([r for p in OLD for r in load(p)])
allrows = [*rows, *extra]
feats = [r["features"] for r in allrows]
x_nc = feature_matrix(feats, compile=False)
x_c = np.vstack([feature_matrix([r["features"] for r in rows], compile=True), feature_matrix([r["features"] for r in extra], compile=False)])
comp = [FEATURE_NAMES.index(n) for n in COMPILED_NAMES]
print("compiled rows with registers:", int(np.isfinite(x_c[: len(rows), comp[0]]).sum()), "of", len(rows), flush=True)
y = measured_us(allrows)
log_us = np.log(y)
groups = [str(r["features"].get("group")) for r in allrows]
index = {id(r): i for i, r in enumerate(allrows)}
res = {}
for seed in (0, 1, 2):
    train, test = split_by_graph(rows, 0.25, seed)
    tr = np.array([index[id(r)] for r in train])
    te = np.array([index[id(r)] for r in test])
    ix = np.concatenate([tr, len(rows) + extra_for(extra, test)])
    reg = fit_matrix(columns(x_nc[tr], REGRESSOR_NAMES), y[tr], "gbr", 0, offset_x=x_nc[tr])
    base = predict_matrix(reg, x_nc[te], columns=columns(x_nc[te], REGRESSOR_NAMES))
    te_groups = [groups[i] for i in te]
    a, b, lab = training_pairs(log_us[ix], [groups[i] for i in ix])
    for name, x in (("no compiled features", x_nc), ("compiled features", x_c)):
        ranker = fit_pairs(x[ix], a, b, lab, None)
        pred = order_within_groups(base, ranker.scores(x[te], te_groups), te_groups)
        m = metrics(y[te], np.exp(pred), te_groups)
        res.setdefault(name, []).append([getattr(m, k) for k in COLS])
        print(f"seed {seed} {name}: " + " ".join(f"{k} {getattr(m, k):.3f}" for k in COLS), flush=True)
for name, v in res.items():
    print(f"mean3 {name}: " + " ".join(f"{k} {val:.3f}" for k, val in zip(COLS, np.mean(v, axis=0))))
