#!/bin/bash
# session 15, call 4: more of cost-model collection on the current codegen (literal trip counts,
# one-step looped rows, best-first refine), one collect per GPU of a two-GPU host.
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git rev-parse HEAD 2>/dev/null
python3 -m benchmarks.collect_gpus --out $OUT/c --first-seed 14 --programs 400 --budget 370 --device cuda --top-k 8 --explore 0.5
ls -la $OUT/c
