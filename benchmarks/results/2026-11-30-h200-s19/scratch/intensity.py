import gzip, json, re
from pathlib import Path
import numpy as np
from collections import Counter
from costmodel.model import usable
from costmodel.features import feature_matrix, FEATURE_NAMES
rows = []
for p in sorted(Path("costmodel/data").glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        rows += [json.loads(l) for l in f]
rows = usable(rows)
X = feature_matrix([m["features"] for m in rows], compile=False)
F = {n: X[:, i] for i, n in enumerate(FEATURE_NAMES)}
t = np.array([m["stats"]["median_us"] for m in rows])
ratio = t / (F["ideal_us"] + 2)
clean = (F["strided_accesses"] == 0) & (F["irregular_accesses"] == 0)
big = F["ideal_us"] > 20
for lo, hi in [(0, 2), (2, 4), (4, 6), (6, 8), (8, 12), (12, 20), (20, 1e9)]:
    m = big & clean & (F["op_intensity"] >= lo) & (F["op_intensity"] < hi)
    print(f"contiguous, intensity {lo}-{hi}: {m.sum()} rows, ratio median {np.median(ratio[m]):.2f} p10 {np.percentile(ratio[m],10):.2f}")
m = big & clean & (F["op_intensity"] >= 7) & (F["op_intensity"] < 14)
c = Counter(); ex = {}
for i in np.flatnonzero(m):
    f = rows[i]["features"]; k = (f["kind"], f["graph"][:8], round(F["bytes_per_element"][i],1), int(F["transcendental"][i]), int(F["division"][i]), bool(f["config"].get("online")), round(F["op_intensity"][i],1))
    c[k] += 1; ex.setdefault(k, []).append(ratio[i])
for k, v in c.most_common(25): print(k, v, "ratio min %.2f med %.2f" % (min(ex[k]), np.median(ex[k])))
