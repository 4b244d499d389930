#!/bin/bash
# session 18, call 3 (nvidia-h200-x2): cost-model data where the long-row kernels (cross-entropy's
# 32000-wide rows) have few neighbours: corpus programs that reduce rows of at least 8192 elements
# (collect --min-row 8192), seeds 20-21, one collect per GPU, 300 s.
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m benchmarks.collect_gpus --out $OUT/c --first-seed 20 --programs 1500 --min-row 8192 --budget 300 --device cuda --top-k 8 --explore 0.5 > $OUT/collect_log.txt 2>&1
echo "collect rc $?"
tail -5 $OUT/collect_log.txt
ls -la $OUT/c
