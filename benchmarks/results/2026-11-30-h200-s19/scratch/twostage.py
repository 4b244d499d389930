"""Held-out split 0: the ranker's pick by Borda over the whole group vs re-scored among its top m."""
import gzip, json
from pathlib import Path
import numpy as np
from costmodel.model import CostModel, usable, measured_us, columns
from costmodel.evaluate import split_by_graph
from costmodel.features import feature_matrix
from costmodel.rank import group_indices
rows = []
for p in sorted(Path("costmodel/data").glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        rows += [json.loads(l) for l in f]
model = CostModel.from_bytes(Path("costmodel/pretrained/cuda-nvidia-h200-sm90.pkl").read_bytes())
_, test = split_by_graph(usable(rows), 0.25, 0)
y = measured_us(test)
x = feature_matrix([r["features"] for r in test], compile=False)
xr = columns(x, model.ranker.feature_names)
xr = x if xr is None else xr
groups = [str(r["features"]["group"]) for r in test]
ixs = group_indices(groups)
s_all = model.ranker.scores(xr, groups)
res = {m: [] for m in (0, 2, 3, 4, 6)}
for ix in ixs:
    ix = np.asarray(ix)
    best = y[ix].min()
    order = ix[np.argsort(-s_all[ix], kind="stable")]
    res[0].append(y[order[0]] / best - 1)
    for m in (2, 3, 4, 6):
        top = order[:m]
        if len(top) < 2:
            res[m].append(y[top[0]] / best - 1); continue
        sub = model.ranker.scores(xr[top], ["g"] * len(top))
        res[m].append(y[top[np.argmax(sub)]] / best - 1)
for m, r in res.items():
    r = np.array(r)
    print(f"{'Borda over the group' if m == 0 else f're-scored among top {m}'}: groups {len(r)}, peak@1 {np.mean(r <= 0.01):.3f}, within 2% {np.mean(r <= 0.02):.3f}, regret {np.mean(r):.4f}")
