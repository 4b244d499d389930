import gzip, json
from pathlib import Path
import numpy as np
from collections import defaultdict
from costmodel.model import usable
from costmodel.features import feature_matrix, FEATURE_NAMES
rows = []
for p in sorted(Path("costmodel/data").glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        for l in f:
            r = json.loads(l); r["export"] = p.name[5:-9]; rows.append(r)
rows = usable(rows)
X = feature_matrix([m["features"] for m in rows], compile=False)
F = {n: X[:, i] for i, n in enumerate(FEATURE_NAMES)}
t = np.array([m["stats"]["median_us"] for m in rows])
ratio = t / (F["ideal_us"] + 2)
sel = (F["ideal_us"] > 30) & (F["rnumel"] >= 4096) & (F["is_reduction"] > 0)
by = defaultdict(list)
for i in np.flatnonzero(sel):
    f = rows[i]["features"]
    by[(rows[i]["export"], f["graph"][:8], f["numel"], f["rnumel"], round(F["bytes_per_element"][i], 1), round(F["r_util"][i], 2))].append(ratio[i])
for k, v in sorted(by.items(), key=lambda kv: kv[0][3]):
    print(k, len(v), "best ratio %.2f median %.2f" % (min(v), np.median(v)))
