#!/bin/bash
# session 17, call 5 (nvidia-h200): seed 16384x4096, rmsnorm and swiglu benchmarked again with tuning,
# the model retrained with the suite data (cm5-gbr+rank-750c278a7e), the tuning DB kept to see what
# the search measured.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/bench
timeout 250 python3 -m benchmarks.run --cases seed_f32_16384x4096 rmsnorm_bf16_32768x4096 swiglu_bf16_16384x11008 --reps 50 --rounds 7 --tune-trials 8 --tune-budget 30 --out $OUT/bench > $OUT/bench/log.txt 2>&1
echo "bench rc $?"
grep -A5 "^| case | MB" $OUT/bench/log.txt
ls -la $OUT/bench
