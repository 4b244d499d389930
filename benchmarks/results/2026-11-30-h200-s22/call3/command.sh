#!/bin/bash
# session 22, call 3 (nvidia-h200-x2): more cost-model data from the general corpus (no --min-row), seeds 26-27,
# one collect per GPU, 500 s. Code as at c9b5c42.
# Prediction (before the run): 14-23 graphs and 3500-4500 measurements (sessions 15-16's x2 calls: 16-23 graphs,
# 3879-4450 rows). Call 2's row-reducing programs took 64-318 s each (5 graphs); the general corpus mixes in
# pointwise programs, which tune faster.
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m benchmarks.collect_gpus --out $OUT/c --first-seed 26 --programs 400 --budget 500 --device cuda --top-k 8 --explore 0.5 > $OUT/collect_log.txt 2>&1
echo "collect rc $?"
cat $OUT/c/log.txt | grep -v '^\s*$' | tail -40
ls -la $OUT/c
