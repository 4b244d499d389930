"""Does num_stages change a looped reduction's time? Every looped config of the session 15-17 cost-model
data measured at num_stages 1 and at another value, the rest of its config (and its kernel) equal:
the time ratio (stage s / stage 1) by the loop's trip count.

    python benchmarks/results/2026-11-30-h200-s18/scratch/stage_pairs.py > .../stage_pairs.txt
"""
import glob
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
runs = defaultdict(dict)
files = sorted(glob.glob(str(ROOT / "costmodel/data/h200-2026-11-30-s1[5-7]*.jsonl.gz")))
for f in files:
    for line in gzip.open(f, "rt"):
        d = json.loads(line)
        ft, st, c = d["features"], d["stats"], d["features"]["config"]
        if ft["kind"] != "reduction" or c.get("persistent") or not st.get("median_us"):
            continue
        rest = json.dumps({k: v for k, v in c.items() if k != "num_stages"}, sort_keys=True)
        runs[(ft["group"], rest)][c["num_stages"]] = (st["median_us"], ft["rnumel"], c)
ratios = defaultdict(list)
configs = 0
for v in runs.values():
    if 1 not in v or len(v) < 2:
        continue
    configs += 1
    t1, rnumel, c = v[1]
    trips = math.ceil(rnumel / c["RBLOCK"] / c.get("split", 1))
    bucket = "1" if trips <= 1 else "2-8" if trips <= 8 else "9-32" if trips <= 32 else ">32"
    for s, (t, _, _) in v.items():
        if s != 1:
            ratios[bucket].append(t / t1)
            ratios["all"].append(t / t1)
print(f"{len(files)} exports; {configs} looped configs measured at num_stages 1 and at another value")
print("| trips | pairs | median | p10 | p90 | share < 0.98 | share > 1.02 |\n|---|---|---|---|---|---|---|")
for b in ("1", "2-8", "9-32", ">32", "all"):
    r = sorted(ratios[b])
    q = lambda p: r[int(p * (len(r) - 1))]  # noqa: E731
    print(f"| {b} | {len(r)} | {q(.5):.4f} | {q(.1):.4f} | {q(.9):.4f} | {sum(x < .98 for x in r) / len(r):.3f} | "
          f"{sum(x > 1.02 for x in r) / len(r):.3f} |")
