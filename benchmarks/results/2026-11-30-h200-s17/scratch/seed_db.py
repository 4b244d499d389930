"""What call 5's search measured for the seed 16384x4096 graph: each reduction kernel group's configs,
fastest first, from the tuning DB the call kept (`call5/bench/tuning.db`).

    python benchmarks/results/2026-11-30-h200-s17/scratch/seed_db.py > .../seed_db.txt
"""
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

DB = Path(__file__).parent.parent / "call5/bench/tuning.db"
GRAPH = "a0fce0"   # the seed case's graph hash prefix in that DB
db = sqlite3.connect(DB)
groups = defaultdict(list)
for feats, stats in db.execute("select features, stats from kernel_measurements order by created"):
    f, s = json.loads(feats), json.loads(stats)
    if f["graph"].startswith(GRAPH) and f.get("kind") == "reduction" and s.get("median_us"):
        groups[f["group"]].append((s["median_us"], f["config"], f["nodes"], len(f["signature"])))
for g, rows in groups.items():
    rows.sort(key=lambda r: r[0])
    print(f"group {g[:10]}: nodes {rows[0][2]}, {rows[0][3]} kernel arguments, {len(rows)} configs measured")
    for us, cfg, _, _ in rows:
        print(f"  {us:8.2f} us  {json.dumps(cfg, sort_keys=True)}")
