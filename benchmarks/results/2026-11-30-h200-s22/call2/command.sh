#!/bin/bash
# session 22, call 2 (nvidia-h200-x2): more cost-model data where the ranking is weakest (reductions: held-out
# pairwise 0.78 against 0.88 for pointwise in session 19's breakdown): corpus programs that reduce rows of at
# least 256 elements (collect --min-row 256), seeds 24-25, one collect per GPU, 500 s. Code as at c9b5c42.
# Prediction (before the run): about 16 graphs and 3000-4500 measurements in all (session 16's x2 call: 16 graphs,
# 4048 measurements at budget 500).
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m benchmarks.collect_gpus --out $OUT/c --first-seed 24 --programs 1500 --min-row 256 --budget 500 --device cuda --top-k 8 --explore 0.5 > $OUT/collect_log.txt 2>&1
echo "collect rc $?"
tail -5 $OUT/collect_log.txt
python3 - <<'PY'
import json, os, gzip
d = json.load(open(os.environ["OUT"] + "/c/collect.json"))
progs = d.get("programs", [])
print(len(progs), "programs;", sum(1 for p in progs if p.get("ok", True)), "ok")
n = sum(1 for _ in gzip.open(os.environ["OUT"] + "/c/measurements.jsonl.gz", "rt"))
print(n, "measurement rows")
PY
ls -la $OUT/c
