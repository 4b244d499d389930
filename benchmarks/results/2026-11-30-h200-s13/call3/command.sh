#!/bin/bash
# session 13, call 3 (nvidia-h200-x2): GPU 0 the full benchmark (cache_hints in the search space);
# GPU 1 the full GPU test suite, then the rows probe
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final $OUT/rows_probe
( CUDA_VISIBLE_DEVICES=1 timeout 170 python3 -m pytest -q -n 14 tests --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout 330 python3 -m benchmarks.rows_probe --out $OUT/rows_probe > $OUT/rows_probe/log.txt 2>&1 ) &
CUDA_VISIBLE_DEVICES=0 timeout 420 python3 -m benchmarks.run --reps 50 --tune-trials 8 --tune-budget 25 --out $OUT/final > $OUT/final/log.txt 2>&1
rm -f $OUT/final/tuning.db*
wait
tail -3 $OUT/gpu_tests.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_tests.txt | head
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep -v "^|" $OUT/rows_probe/log.txt | grep -v Warn | tail -12
