#!/bin/bash
# session 16, call 3 (nvidia-h200): the full benchmark with the model shipped in 6d72d33
# (cm4-gbr+rank-c6b6e3761a) guiding the search, then the launcher and search tests on the GPU.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final
timeout 450 python3 -m benchmarks.run --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
echo "rc $?"
rm -f $OUT/final/tuning.db*
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
timeout 100 python3 -m pytest -q -n 8 tests/test_launcher.py tests/test_search.py --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
tail -2 $OUT/gpu_tests.txt
