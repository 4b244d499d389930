"""Regressor alone vs ranked in its group: the softmax (8e055006) online group and cross-entropy's online kernels of the
session-17 suite export, predicted by a model (argv[1]) one record at a time (group None) and all together.

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s19/scratch/alone_vs_group.py MODEL.pkl
"""
import gzip, json, sys
import numpy as np
from costmodel.model import usable, CostModel
model = CostModel.from_bytes(open(sys.argv[1], "rb").read())
rows = []
with gzip.open("costmodel/data/h200-2026-11-30-s17-suite.jsonl.gz", "rt") as f:
    rows += [json.loads(l) for l in f]
rows = usable(rows)
for g, grp in [("8e055006", "7a1d7ab6"), ("0e3582af", None)]:
    sel = [m for m in rows if m["features"]["graph"].startswith(g) and (grp is None or m["features"]["group"].startswith(grp)) and m["features"]["nodes"] == ["amax", "sum_1"] + (["output"] if grp else [])]
    if grp is None:
        sel = [m for m in sel if m["features"]["config"].get("online")]
    alone = model.predict_us([dict(m["features"], group=None) for m in sel])
    grouped = model.predict_us([m["features"] for m in sel])
    for i in np.argsort([m["stats"]["median_us"] for m in sel]):
        c = sel[i]["features"]["config"]
        print(g, "meas %.1f  alone %.1f  in group %.1f" % (sel[i]["stats"]["median_us"], alone[i], grouped[i]), {k: v for k, v in c.items() if k != "num_stages"})
