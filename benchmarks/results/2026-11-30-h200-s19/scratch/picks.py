"""Per held-out suite group (cross-entropy 0e3582af, layernorm fdecb652): the model's in-group pick, measured, vs the group's best."""
import gzip, json, sys
import numpy as np
from costmodel.model import usable, CostModel
model = CostModel.from_bytes(open(sys.argv[1], "rb").read())
with gzip.open("costmodel/data/h200-2026-11-30-s17-suite.jsonl.gz", "rt") as f:
    rows = usable([json.loads(l) for l in f])
by = {}
for m in rows:
    if m["features"]["graph"][:8] in ("0e3582af", "fdecb652"):
        by.setdefault(m["features"]["group"], []).append(m)
regrets = []
for g, ms in by.items():
    if len(ms) < 3: continue
    p = model.predict_us([m["features"] for m in ms]); y = np.array([m["stats"]["median_us"] for m in ms])
    i = int(np.argmin(p)); regrets.append(y[i] / y.min() - 1)
    if y.min() > 5: print(ms[0]["features"]["graph"][:8], ms[0]["features"]["nodes"][:3], len(ms), "pick %.1f best %.1f" % (y[i], y.min()), {k: v for k, v in ms[i]["features"]["config"].items() if k != "num_stages"})
print("groups", len(regrets), "mean regret %.3f" % np.mean(regrets), "picks within 2%%: %d" % sum(r <= 0.02 for r in regrets))
