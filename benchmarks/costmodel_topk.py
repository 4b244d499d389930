"""Offline check of model-guided config search on held-out graphs: measuring only the cost model's
top-k configs of each kernel, how far is the best of them from the best measured config?

    python3 -m benchmarks.costmodel_topk   (reads costmodel/data/*.jsonl.gz and the pretrained H200 model)
"""
import gzip, json, collections, numpy as np
from costmodel.model import CostModel
from costmodel.evaluate import split_by_graph
rows = [json.loads(l) for l in gzip.open("costmodel/data/h200-2026-11-29.jsonl.gz", "rt")]
rows = [r for r in rows if r["stats"].get("median_us") and not r["stats"].get("error")]
train, test = split_by_graph(rows, 0.25, 0)
m = CostModel.from_bytes(open("costmodel/pretrained/cuda-nvidia-h200-sm90.pkl", "rb").read())
print(f"model {m.version} (pretrained cuda-nvidia-h200-sm90; ranker: {'pairs' if getattr(m, 'ranker', None) else 'none'}); "
      f"held-out graphs of split seed 0, {len(test)} measurements")
pred = m.predict_us([r["features"] for r in test])
groups = collections.defaultdict(list)
for r, p in zip(test, pred):
    groups[r["features"]["group"]].append((p, r["stats"]["median_us"]))
for k in (1, 2, 3, 5, 8):
    regrets = []
    for g, v in groups.items():
        if len(v) < 3: continue
        best = min(t for _, t in v)
        topk = sorted(v)[:k]
        regrets.append(min(t for _, t in topk) / best - 1)
    regrets = np.array(regrets)
    print(f"k={k}: groups {len(regrets)}, mean regret {regrets.mean()*100:.1f}%, within 5%: {np.mean(regrets<=0.05)*100:.0f}%, within 1%: {np.mean(regrets<=0.01)*100:.0f}%, within 10%: {np.mean(regrets<=0.10)*100:.0f}%")
