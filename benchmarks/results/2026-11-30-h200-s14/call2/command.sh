#!/bin/bash
# session 14, call 2 (nvidia-h200): the GPU test suite at the literal-trip-count commit, then
# trip_probe (literal vs runtime loop bound on looped row reductions, Inductor alongside)
source .whl/prelude.sh || exit 1
mkdir -p $OUT/trip_probe
timeout 230 python3 -m pytest -q -n 14 tests --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_tests.txt | head
timeout 340 python3 -m benchmarks.trip_probe --out $OUT/trip_probe > $OUT/trip_probe/log.txt 2>&1
echo "probe rc $?"
grep -v Warning $OUT/trip_probe/log.txt | grep -E "^(##|\||runtime /)" | head -120
