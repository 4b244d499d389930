#!/bin/bash
# session 16, call 2: the launcher's GPU tests (compiled_stats), then a cost-model collection on
# the current codegen, seeds 16-17, one collect per GPU of a two-GPU host; each measurement now
# carries the GPU loader's registers / local / shared bytes (stats.gpu_compile).
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -q tests/test_launcher.py 2>&1 | tail -3
python3 -m benchmarks.collect_gpus --out $OUT/c --first-seed 16 --programs 400 --budget 500 --device cuda --top-k 8 --explore 0.5
ls -la $OUT/c
