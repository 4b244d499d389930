#!/bin/bash
# session 13, call 4 (nvidia-h200-x2): GPU 0 the full benchmark (search with refine, cache_hints);
# GPU 1 the GPU tests of the search, cache hints, early loads, split reductions and the benchmark cases
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final
( CUDA_VISIBLE_DEVICES=1 timeout 250 python3 -m pytest -q -n 8 tests/test_search.py tests/test_cache_hints.py tests/test_early_loads.py tests/test_split_reduction.py tests/test_benchmark_cases.py tests/test_api.py --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1 ) &
CUDA_VISIBLE_DEVICES=0 timeout 450 python3 -m benchmarks.run --reps 50 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
rm -f $OUT/final/tuning.db*
wait
tail -3 $OUT/gpu_tests.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_tests.txt | head
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
