#!/bin/bash
# session 13, call 1 (nvidia-h200-x2): GPU 0 tests then the benchmark; GPU 1 a new cost-model collection (seed 1)
source .whl/prelude.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/nvidia-smi.txt
mkdir -p $OUT/collect-s1 $OUT/final
( CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.collect --out $OUT/collect-s1 --programs 400 --seed 1 --budget 530 --device cuda --top-k 8 --explore 0.5 > $OUT/collect-s1/log.txt 2>&1; rm -f $OUT/collect-s1/measurements.db* ) &
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 14 tests --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt
CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m benchmarks.run --reps 50 --tune-trials 8 --tune-budget 25 --out $OUT/final > $OUT/final/log.txt 2>&1
rm -f $OUT/final/tuning.db*
tail -40 $OUT/final/log.txt
wait
tail -5 $OUT/collect-s1/log.txt
ls -la $OUT/collect-s1
